"""The draft model's column in a recorded answer: its greedy proposal at every position, as
far as verification reads it, and how sure it was (where it agrees, and past its misses);
and the draft model a replay plays back from it (RecordedModel)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from specchat.engine.costs.machine import MachineCosts
from specchat.engine.drafting.recorded import RecordedCache, VirtualClock
from specchat.engine.drafting.trace_column import (
    DRAFT_DEPTH,
    Live,
    RecordedAnswer,
    TraceColumn,
    agreement,
    read_as_verified,
    renumbered_proposals,
)
from specchat.engine.sampling import token_probability

if TYPE_CHECKING:
    from specchat.engine.llamacpp.model import LlamaModel

#: The draft model's source in the ceiling and the ledger: its drafter's name.
MODEL_SOURCE = "draft"

#: Rows of draft-model logits held at once (each row is a vocabulary's worth of floats).
_CHUNK = 32


@dataclass(frozen=True)
class DraftModelColumn(TraceColumn):
    """The draft model's proposals along an answer.

    Attributes:
        draft: per position, its greedy proposal as far as verification reads it.
        draft_confidence: per position, its top probability there (after the prompt and the
            answer before it): the confidence it drafts that position with while its draft
            agrees with the answer (None if not recorded).
        draft_past_miss: per position where its choice is not the answer's token, the
            confidence it drafts each further token with after its own choice (greedy, up
            to DRAFT_DEPTH − 1 of them); None at positions where it agrees, and None for the
            whole answer if not recorded. Such tokens are never kept, but their confidence
            decides how far a draft goes on past its miss.
    """

    order = 90  # after every source that needs no catching up
    catches_up = True
    kind = "model"
    fields: ClassVar[Mapping[str, Any]] = {
        "draft": None,
        "draft_confidence": None,
        "draft_past_miss": None,
    }

    draft: tuple[tuple[int, ...], ...] = ()
    draft_confidence: tuple[float, ...] | None = None
    draft_past_miss: tuple[tuple[float, ...] | None, ...] | None = None

    @classmethod
    def record(
        cls, name: str, prompt: Sequence[int], answer: Sequence[int], live: Live
    ) -> DraftModelColumn | None:
        model = live.draft_model
        if model is None or not answer:
            return None
        prompt, answer = list(prompt), list(answer)
        guesses, top = _draft_argmax(model, prompt, answer)
        drafts = tuple(
            read_as_verified(guesses[i : i + DRAFT_DEPTH], answer[i:]) for i in range(len(answer))
        )
        confidences = tuple(round(p, 6) for p in top)  # what a rounds file keeps of them
        past_miss = draft_past_misses(model, prompt, answer, guesses)
        return cls(name, drafts, confidences, past_miss)

    @classmethod
    def from_record(cls, name: str, data: Mapping[str, Any]) -> DraftModelColumn | None:
        draft = data.get("draft")
        if draft is None:
            return None
        confidence = data.get("draft_confidence")
        past = data.get("draft_past_miss")
        return cls(
            name,
            tuple(tuple(int(t) for t in p) for p in draft),
            None if confidence is None else tuple(float(p) for p in confidence),
            None
            if past is None
            else tuple(None if c is None else tuple(float(p) for p in c) for c in past),
        )

    def to_record(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "draft": [list(p) for p in self.draft],
            "draft_confidence": None
            if self.draft_confidence is None
            else list(self.draft_confidence),
        }
        if self.draft_past_miss is not None:
            data["draft_past_miss"] = [None if c is None else list(c) for c in self.draft_past_miss]
        return data

    def list_lengths(self) -> set[int]:
        lengths = {len(self.draft)}
        if self.draft_confidence is not None:
            lengths.add(len(self.draft_confidence))
        if self.draft_past_miss is not None:
            lengths.add(len(self.draft_past_miss))
        return lengths

    def renumbered(self, renumber: Callable[[Sequence[int]], tuple[int, ...]]) -> DraftModelColumn:
        drafts = renumbered_proposals(self.draft, renumber)
        return DraftModelColumn(self.name, drafts, self.draft_confidence, self.draft_past_miss)

    def kept(self, i: int, answer: Sequence[int]) -> int:
        return agreement(self.draft[i], answer[i:])

    def token_ms(self, costs: MachineCosts) -> float | None:
        return costs.draft_token_ms

    def played_model(
        self, trace: RecordedAnswer, costs: MachineCosts, clock: VirtualClock, n_vocab: int
    ) -> RecordedModel | None:
        if costs.draft_token_ms is None:
            return None
        return RecordedModel(trace, costs, clock=clock, n_vocab=n_vocab)


def draft_past_misses(
    model: LlamaModel, prompt: Sequence[int], answer: Sequence[int], choices: Sequence[int]
) -> tuple[tuple[float, ...] | None, ...]:
    """`DraftModelColumn.draft_past_miss`: at each position whose draft-model choice
    (`choices`, its argmax there) is not the answer's token, the draft model's confidence at
    each token it drafts after that choice, one token a decode as a draft goes."""
    text = [*prompt, *answer]
    out: list[tuple[float, ...] | None] = []
    for i, (choice, written) in enumerate(zip(choices, answer, strict=True)):
        if choice == written:
            out.append(None)
            continue
        end = len(prompt) + i
        cached = model.sync(text[:end])
        if cached < end:
            model.decode(text[cached:end], logits="none")
        token, chain = int(choice), []
        try:
            for _ in range(DRAFT_DEPTH - 1):
                row = np.asarray(model.decode([token], logits="last"))[-1]
                token = int(np.argmax(row))
                chain.append(round(token_probability(row, token), 6))  # as a live draft reads it
        finally:
            model.truncate(end)
        out.append(tuple(chain))
    return tuple(out)


def _draft_argmax(
    model: LlamaModel, prompt: list[int], answer: list[int]
) -> tuple[list[int], list[float]]:
    """The draft model's argmax after prompt + answer[:j], for every j, and its probability
    (softmax at temperature 1, as the draft model's confidence stop reads it)."""
    cached = model.sync(prompt[:-1])
    if cached < len(prompt) - 1:
        model.decode(prompt[cached:-1], logits="none")
    base = model.n_past
    feed = [prompt[-1], *answer[:-1]]
    guesses: list[int] = []
    top: list[float] = []
    try:
        for start in range(0, len(feed), _CHUNK):
            rows = np.asarray(model.decode(feed[start : start + _CHUNK], logits="all"))
            guesses.extend(int(t) for t in np.argmax(rows, axis=1))
            peak = rows.max(axis=1, keepdims=True)
            top.extend(float(p) for p in 1.0 / np.exp(rows - peak).sum(axis=1))
    finally:
        model.truncate(base)
    return guesses, top


class RecordedModel(RecordedCache):
    """The pair's draft model on one recorded answer, for the real drafters that run it.

    It answers what they ask of a model (`sync`, `cached_prefix`, `truncate`, `decode`):
    after the prompt and any part of the answer, its logits rank first the token the draft
    model chose there, with the probability it gave it (both recorded at temperature 0).
    After text the answer never wrote (a draft past its first miss) the live choice is not
    known: it proposes a token no answer holds, so such a draft is never kept, with the
    confidence the draft model had there live where the trace recorded it (after its own
    choice at a miss: `DraftModelColumn.draft_past_miss`), and with full confidence where it did
    not (the costlier guess: the draft goes on). Its time is the cost table's, on a clock of its
    own that the drafters time themselves by (a replay's, shared with its target): a decode of
    one or two tokens costs a drafted token, a longer one (a catch-up) the table's catch-up
    rate and then one drafted token.

    Attributes:
        path: the prompt's id (where a message names the model's file).
        n_ctx: room for any context a drafter may hand it.
        tokens: what its cache holds.
        read_ms: time spent reading a prompt (a decode asking for no logits: readying
            before an answer's first round, outside every round's time).
        catchup_ms: time spent catching up inside drafts (the part of a decode of more than
            two tokens beyond its one drafted token): what the replay's loss ledger calls
            one-off.
    """

    can_rollback = True

    def __init__(
        self,
        trace: RecordedAnswer,
        costs: MachineCosts,
        *,
        clock: VirtualClock | None = None,
        n_vocab: int | None = None,
    ) -> None:
        """`n_vocab`: rows of logits, the last one a token no answer holds (by default one
        past the trace's highest token id)."""
        column = next((c for c in trace.columns.values() if isinstance(c, DraftModelColumn)), None)
        if column is None:
            raise ValueError("the trace holds no draft-model record")
        super().__init__()
        self._text = [*trace.prompt_tokens, *trace.answer]
        self._start = len(trace.prompt_tokens)
        self._choice = [proposal[0] if proposal else -1 for proposal in column.draft]
        self._confidence = column.draft_confidence
        self._past_miss = column.draft_past_miss
        self._n_vocab = n_vocab or max([*self._text, *self._choice, 0]) + 2
        self._unseen = self._n_vocab - 1  # a token no answer holds
        self._costs = costs
        self._clock = clock or VirtualClock()
        self.path = Path(trace.prompt)
        self.n_ctx = len(self._text) + 1024
        self.read_ms = 0.0
        self.catchup_ms = 0.0

    def clock(self) -> float:
        """Seconds on its clock (what its decodes, and the target's on a shared one, cost)."""
        return self._clock()

    def decode(self, tokens: Sequence[int], *, logits: str = "last") -> np.ndarray:
        if not tokens:
            raise ValueError("nothing to decode")
        token_ms = self._costs.draft_token_ms or 0.0
        catchup = self._costs.catchup_ms(len(tokens)) if len(tokens) > 2 else 0.0
        self._clock.spend(catchup + token_ms)
        if logits == "none":
            self.read_ms += catchup + token_ms
        else:
            self.catchup_ms += catchup
        first = len(self.tokens)
        self.tokens.extend(int(t) for t in tokens)
        if logits == "none":
            return np.zeros((0, self._n_vocab))
        ends = range(first + 1, len(self.tokens) + 1)
        if logits == "last":
            ends = range(len(self.tokens), len(self.tokens) + 1)
        return np.stack([self._row(end) for end in ends])

    def _row(self, end: int) -> np.ndarray:
        """Logits after the cache's first `end` tokens."""
        token, confidence = self._unseen, 1.0
        i = end - self._start
        if 0 <= i < len(self._choice) and self.tokens[:end] == self._text[:end]:
            token = self._choice[i]
            if self._confidence is not None:
                confidence = self._confidence[i]
        else:
            confidence = self._confidence_past_miss(end)
        rest = max(1.0 - confidence, 1e-12) / (self._n_vocab - 1)
        row = np.full(self._n_vocab, math.log(rest))
        row[token] = math.log(max(confidence, 1e-12))
        return row

    def _confidence_past_miss(self, end: int) -> float:
        """The recorded confidence after the cache's first `end` tokens where they leave the
        answer at one of the draft model's own misses (1.0 where nothing was recorded)."""
        if self._past_miss is None:
            return 1.0
        apart = self._start
        limit = min(end, len(self._text))
        while apart < limit and self.tokens[apart] == self._text[apart]:
            apart += 1
        i = apart - self._start
        if apart >= limit or i >= len(self._choice) or self.tokens[apart] != self._choice[i]:
            return 1.0
        chain = self._past_miss[i]
        after = end - apart - 1
        return 1.0 if chain is None or after >= len(chain) else chain[after]
