"""What passes between the HTTP side and the engine thread: a job and the events it yields."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from specchat.engine.baseline import PlainBaseline
from specchat.engine.decoding.kept_sources import KeptSource
from specchat.engine.types import RoundResult, Stats, StopReason
from specchat.host.answer_format.reader import AnswerReply
from specchat.host.chat_call import ChatCall
from specchat.host.errors import ApiError
from specchat.host.tool_prompt import ToolPrompt


@dataclass(frozen=True)
class Started:
    """The prompt was rendered and the answer begins.

    Attributes:
        prompt_tokens: the prompt's length in tokens.
        max_tokens: the longest answer, after capping by the context.
        tools: the request's tools as the prompt took them: the answer's calls are read in
            their format, its text follows their forced start (if any).
    """

    prompt_tokens: int
    max_tokens: int
    tools: ToolPrompt = field(default_factory=ToolPrompt)


@dataclass(frozen=True)
class Round:
    """One round of the answer.

    Attributes:
        result: the round as the decoder yielded it.
    """

    result: RoundResult


@dataclass(frozen=True)
class Summary:
    """A finished answer, with everything the response reports.

    Attributes:
        stop: why it ended.
        stats: the decoder's totals (prompt tokens evaluated, rounds, drafted, kept).
        prompt_tokens: the prompt's length.
        text: the answer (after its forced start, if it had one), as the model wrote it.
        kept: kept draft tokens by source, most first.
        prediction_accepted: draft tokens from the request's prediction that were kept.
        prediction_rejected: draft tokens from the prediction that were checked and thrown away.
        baseline: the plain rate speed-ups are measured against, or None before one exists.
        mode: the drafting mode asked for.
        reply: the answer read back in its format (thinking, text, calls), or None (its
            text is all content).
        tools: the request offered functions (its calls were read).
        reasoning_tokens: the answer's tokens that were thinking.
        call_tokens: the answer's tokens inside tool calls (their markup and arguments).
        call_kept: of those, the draft tokens the target kept.
        near_ties: why the answer can part from plain at a near-tie on this target whatever
            its keys (a hybrid's, LoadInfo.near_ties), or "".
        end_token: the model wrote its end-of-generation token (not in the text; its pass
            is in the decode time).
    """

    stop: StopReason
    stats: Stats
    prompt_tokens: int
    text: str
    kept: tuple[KeptSource, ...]
    prediction_accepted: int
    prediction_rejected: int
    baseline: PlainBaseline | None
    mode: str
    reply: AnswerReply | None = None
    tools: bool = False
    reasoning_tokens: int = 0
    call_tokens: int = 0
    call_kept: int = 0
    near_ties: str = ""
    end_token: bool = False


def evaluated(prompt_tokens: int, stats: Stats) -> int:
    """Prompt tokens evaluated for a request, as llama.cpp's server counts them: those read
    before the answer, and the prompt's last token, which the decoder reads with the first
    round (so a fresh prompt has none cached, and a repeated one all but that token)."""
    return min(prompt_tokens, stats.prompt_tokens + 1) if stats.rounds else stats.prompt_tokens


@dataclass(frozen=True)
class Finished:
    """The answer ended (any stop reason).

    Attributes:
        summary: what it was and how it went.
    """

    summary: Summary


@dataclass(frozen=True)
class Failed:
    """The request failed before or while answering.

    Attributes:
        error: the error the client gets.
    """

    error: ApiError


JobEvent = Started | Round | Finished | Failed


class Job:
    """One request waiting for, or on, the engine thread.

    Attributes:
        call: the checked request.
        cancel: set from any thread (the client went away): the answer stops at its next
            round, and a job still waiting is skipped.
        deliver: called on the engine thread with each event, in order; must not block.
        label: a few words for people (the request's number and its client).
    """

    def __init__(
        self, call: ChatCall, *, deliver: Callable[[JobEvent], None], label: str = ""
    ) -> None:
        self.call = call
        self.cancel = threading.Event()
        self.deliver = deliver
        self.label = label
