"""A draft head played back from a trace: what a head drafter drafts with, at recorded cost."""

from __future__ import annotations

from specchat.bench.recorded_target import RecordedTarget, VirtualClock
from specchat.bench.trace import AnswerTrace
from specchat.engine.costs.table import MachineCosts


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
        trace: AnswerTrace,
        name: str,
        costs: MachineCosts,
        target: RecordedTarget,
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
        self._drafts = trace.heads[name]
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
