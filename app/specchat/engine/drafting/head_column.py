"""A head drafter's column in a recorded answer: its head's greedy draft at every position,
as far as verification reads it (written under the record's "heads", by drafter); and the
head a replay plays back from it (RecordedHead)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from specchat.engine.drafting.trace_column import (
    DRAFT_DEPTH,
    Live,
    RecordedAnswer,
    TraceColumn,
    agreement,
    read_as_verified,
    renumbered_proposals,
)

if TYPE_CHECKING:
    from specchat.engine.costs.machine import MachineCosts
    from specchat.engine.drafting.head_protocol import Head
    from specchat.engine.drafting.recorded import RecordedCache, VirtualClock
    from specchat.engine.llamacpp.model import LlamaModel


@dataclass(frozen=True)
class HeadColumn(TraceColumn):
    """One head's drafts along an answer (the drafter's `name`: "mtp").

    Attributes:
        drafts: per position, the head's greedy draft as far as verification reads it.
    """

    order = 50
    fields: ClassVar[Mapping[str, Any]] = {"heads": {}}

    drafts: tuple[tuple[int, ...], ...] = ()

    @classmethod
    def record(
        cls, name: str, prompt: Sequence[int], answer: Sequence[int], live: Live
    ) -> HeadColumn | None:
        head = (live.heads or {}).get(name)
        if head is None or not answer:
            return None
        if live.target is None:
            raise ValueError("a head's drafts are recorded after its target's cache: give it")
        return cls(name, _head_drafts(head, live.target, list(prompt), list(answer)))

    @classmethod
    def from_record(cls, name: str, data: Mapping[str, Any]) -> HeadColumn | None:
        drafts = (data.get("heads") or {}).get(name)
        if drafts is None:
            return None
        return cls(name, tuple(tuple(int(t) for t in p) for p in drafts))

    def to_record(self) -> dict[str, Any]:
        # Written only where there are heads: a trace without them reads as before.
        return {"heads": {self.name: [list(p) for p in self.drafts]}}

    def list_lengths(self) -> set[int]:
        return {len(self.drafts)}

    def renumbered(self, renumber: Callable[[Sequence[int]], tuple[int, ...]]) -> HeadColumn:
        return HeadColumn(self.name, renumbered_proposals(self.drafts, renumber))

    def kept(self, i: int, answer: Sequence[int]) -> int:
        return agreement(self.drafts[i], answer[i:])

    def token_ms(self, costs: MachineCosts) -> float | None:
        return costs.head_token_ms(self.name)

    @property
    def heads(self) -> dict[str, tuple[tuple[int, ...], ...]]:
        return {self.name: self.drafts}

    def played_head(
        self,
        trace: RecordedAnswer,
        costs: MachineCosts,
        target: RecordedCache,
        clock: VirtualClock,
        unseen: int,
    ) -> RecordedHead | None:
        if costs.head_token_ms(self.name) is None:
            return None
        return RecordedHead(trace, self.name, costs, target, clock, unseen=unseen)


def _head_drafts(
    head: Head, target: LlamaModel, prompt: list[int], answer: list[int]
) -> tuple[tuple[int, ...], ...]:
    """The head's greedy draft at every position of `answer`, read as verification reads it.

    Each step of a head's draft reads the hidden state of the step before, not the target's,
    so no batched pass gives them all: as a round does, the head drafts after the target has
    cached the text before the position, and the target then reads one more token."""
    cached = target.sync(prompt[:-1])
    if cached < len(prompt) - 1:
        target.decode(prompt[cached:-1], logits="none")
    text = [*prompt, *answer]
    drafts = []
    for i in range(len(answer)):
        last = text[len(prompt) + i - 1]
        guess = head.draft(last, min(DRAFT_DEPTH, len(answer) - i))
        drafts.append(read_as_verified(guess, answer[i:]))
        target.decode([last], logits="none")
    return tuple(drafts)


class RecordedHead:
    """One head over the target's hidden state on one recorded answer, for the real drafter
    that drafts with it (MtpDrafter, or any drafter whose listing reads the target).

    It answers what such a drafter asks of its head (`ready`, `draft`): after the prompt and
    any part of the answer, its draft is the head's recorded one there, as far as
    verification read it. Past that (its first miss, or the record's depth) the live draft is
    not known: it drafts a token no answer holds, so the draft still runs to K and its rest
    is never kept (the costlier guess, as RecordedModel makes). Each drafted token costs the
    cost table's price for the head, on the replay's clock, which the drafter times itself
    by. Like a live head it follows the target's cache (no tree passes).

    Attributes:
        name: the drafter it drafts for ("mtp").
        token_ms: what one drafted token costs (one step of the head).
    """

    def __init__(
        self,
        trace: RecordedAnswer,
        name: str,
        costs: MachineCosts,
        target: RecordedCache,
        clock: VirtualClock,
        *,
        unseen: int,
    ) -> None:
        """`unseen`: a token no answer holds (the replay's last row of logits)."""
        token_ms = costs.head_token_ms(name)
        if token_ms is None:
            raise ValueError(f"the cost table prices no drafted token of the {name} head")
        self.name = name
        self.token_ms = token_ms
        column = trace.columns[name]
        assert isinstance(column, HeadColumn)
        self._drafts = column.drafts
        self._text = [*trace.prompt_tokens, *trace.answer]
        self._start = len(trace.prompt_tokens)
        self._target = target
        self._clock = clock
        self._unseen = unseen
        target.follow(self)

    @property
    def ready(self) -> bool:
        """Always: a recorded head has a draft at every position of the answer."""
        return True

    def draft(self, last: int, k: int, *, min_confidence: float = 0.0) -> list[int]:
        """k tokens after the target's cache and `last`: the recorded draft there, then
        tokens no answer holds (its confidence was not recorded: it never stops early)."""
        if k <= 0:
            return []
        end = self._target.n_past + 1  # the context: the cache and `last`
        i = end - self._start
        recorded: tuple[int, ...] = ()
        on_record = 0 <= i < len(self._drafts) and self._text[end - 1] == last
        if on_record and self._target.tokens == self._text[: end - 1]:
            recorded = self._drafts[i][:k]
        self._clock.spend(k * self.token_ms)
        return [*recorded, *[self._unseen] * (k - len(recorded))]
