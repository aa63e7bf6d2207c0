"""What a replay plays back, shared by the drafters' stand-ins and the recorded target
(bench/hindsight/recorded_target.py): its virtual clock, a played-back model's cache, and what a
played-back draft model tells the replay beside a model's answers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from specchat.engine.llamacpp.target import DraftModel

if TYPE_CHECKING:
    from specchat.engine.llamacpp.recurrent_state import Rollback


class VirtualClock:
    """A replay's clock: seconds of the recorded passes and drafts priced so far."""

    def __init__(self) -> None:
        self.ms = 0.0

    def __call__(self) -> float:
        return self.ms / 1000.0

    def spend(self, ms: float) -> None:
        self.ms += ms


class RecordedCache:
    """What a played-back model's cache holds, and its rollback, as LlamaModel keeps them.

    Attributes:
        tokens: what its cache holds.
    """

    def __init__(self) -> None:
        self.tokens: list[int] = []

    @property
    def n_past(self) -> int:
        return len(self.tokens)

    def cached_prefix(self, tokens: Sequence[int]) -> int:
        return agreement_of(self.tokens, tokens)

    def sync(self, tokens: Sequence[int]) -> int:
        common = self.cached_prefix(tokens)
        self.truncate(common)
        return common

    snapshot_depth = 0

    @property
    def rollback(self) -> Rollback:
        """An attention cache: rejected drafts drop for nothing (see LlamaModel.rollback)."""
        from specchat.engine.llamacpp.recurrent_state import Rollback

        return Rollback.CACHE

    def truncate(self, n_keep: int) -> None:
        del self.tokens[n_keep:]

    def mark(self, rows: int | None = None) -> None:
        """Nothing to remember: the cache drops tokens on its own."""

    def mark_prompt(self) -> None:
        """Nothing to keep: the cache drops tokens on its own."""

    def follow(self, follower: object) -> None:
        """Something follows this cache (a played-back head): nothing to tell it."""


class PlayedModel(DraftModel, Protocol):
    """A draft model played back from a trace's column, with the time it spent outside the
    rounds' own.

    Attributes:
        read_ms: time spent reading a prompt, before an answer's first round.
        catchup_ms: time spent catching up inside drafts (the loss ledger's one-off).
    """

    @property
    def read_ms(self) -> float: ...

    @property
    def catchup_ms(self) -> float: ...


def agreement_of(a: Sequence[int], b: Sequence[int]) -> int:
    """How long a prefix `a` and `b` share."""
    limit = min(len(a), len(b))
    if list(a[:limit]) == list(b[:limit]):
        return limit
    common = 0
    while a[common] == b[common]:
        common += 1
    return common
