"""Multi-turn bench sessions: each turn's prompt after plain's earlier answers, the prefix a turn
reuses, and what drafting remembers of the session before each run."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specchat.bench.live.records import RunRecord
from specchat.bench.prompts import BenchPrompt
from specchat.engine.history import template_tokenizer, text_tokenizer
from specchat.engine.session import ChatEngine
from specchat.engine.templates.chat_template import ChatMessage

#: Key of the stored documents a session's "history" puts in the index.
_HISTORY_KEY = "bench-history"


@dataclass(frozen=True)
class TurnPrompt:
    """One turn's prompt.

    Attributes:
        tokens: the rendered conversation up to this turn's user message.
        evaluated: prompt tokens this turn evaluates when the turn before (prompt and plain's
            answer) is still cached: the whole prompt for a first turn, the new part after.
    """

    tokens: tuple[int, ...]
    evaluated: int


class Sessions:
    """Turn prompts of every session, built as the plain answers they follow come in.

    Every mode answers turn t after the same conversation: the turns before it with plain's
    answers (at the same temperature and repeat), so turns compare like for like.

    Attributes:
        engine: the loaded pair.
        max_tokens: the answer budget (prompts are fitted to the context with it).
    """

    def __init__(self, engine: ChatEngine, *, max_tokens: int) -> None:
        self.engine = engine
        self.max_tokens = max_tokens
        self._turns: dict[tuple[str, int, float, int], TurnPrompt] = {}

    def prompt(
        self,
        prompt: BenchPrompt,
        turn: int,
        temperature: float,
        repeat: int,
        records: Sequence[RunRecord],
    ) -> TurnPrompt:
        key = (prompt.id, turn, temperature, repeat)
        if key in self._turns:
            return self._turns[key]
        answers = [self._plain(prompt, j, temperature, repeat, records) for j in range(turn)]
        messages = prompt.messages([a.text for a in answers])
        tokens = self.engine.prepare(
            [ChatMessage(m["role"], m["content"]) for m in messages], max_tokens=self.max_tokens
        ).tokens
        reused = 0
        if turn > 0:
            before = self.prompt(prompt, turn - 1, temperature, repeat, records)
            cached = (*before.tokens, *answers[-1].tokens)
            for a, b in zip(cached, tokens, strict=False):
                if a != b:
                    break
                reused += 1
        # The prompt's last token is evaluated by the first round whatever is cached.
        made = TurnPrompt(tokens, len(tokens) - min(reused, len(tokens) - 1))
        self._turns[key] = made
        return made

    def recall(
        self,
        prompt: BenchPrompt,
        turn: int,
        temperature: float,
        repeat: int,
        records: Sequence[RunRecord],
    ) -> None:
        """Leave drafting remembering exactly this session so far, as a user's chat would:
        its stored history and attachments, and every earlier turn's prompt and plain answer.
        Nothing of another prompt or another run leaks into a run."""
        said = self.engine.said
        # This chat is the suffix drafter's to keep in step: here it is made as the earlier
        # turns would have left it (below); what was said before comes through the door.
        chat = said.index
        chat.reset_chat()
        for key in [k for k in said.stored() if isinstance(k, tuple) and k[0] == _HISTORY_KEY]:
            said.drop(key)
        tokenize = template_tokenizer(self.engine.prompt_tokens)
        for number, conversation in enumerate(prompt.history):
            messages = [_Message(m["role"], m["content"]) for m in conversation]
            said.chat((_HISTORY_KEY, number), tokenize(messages))
        for number, attachment in enumerate(prompt.attachments):
            tokens = text_tokenizer(self.engine)(attachment.text)
            said.attachment((_HISTORY_KEY, "attachment", number), tokens)
        said.wait_idle(timeout=60.0)
        for j in range(turn):
            earlier = self.prompt(prompt, j, temperature, repeat, records)
            chat.prepare(earlier.tokens)
            chat.extend(self._plain(prompt, j, temperature, repeat, records).tokens)

    @staticmethod
    def _plain(
        prompt: BenchPrompt,
        turn: int,
        temperature: float,
        repeat: int,
        records: Sequence[RunRecord],
    ) -> RunRecord:
        for record in records:
            if (
                record.prompt == prompt.id
                and record.turn == turn
                and record.temperature == temperature
                and record.repeat == repeat
                and record.variant.mode == "plain"
            ):
                return record
        raise LookupError(f"{prompt.id}: turn {turn} has no plain answer yet")


@dataclass(frozen=True)
class _Message:
    """A history message shaped like a stored one, for the chat-template tokenizer."""

    role: str
    content: str
