"""What a drafter drives its head by: `Head`; a drafter that drafts with one: `DraftsWithHead`."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


class Head(Protocol):
    """A draft head as its drafter drives it: a driver that follows the target's cache
    (engine/llamacpp/hidden_state_head.py's HiddenStateHead: the MTP head's, EAGLE-3's,
    DFlash's), or a stand-in with the same two members (a replay's record)."""

    @property
    def ready(self) -> bool:
        """Whether it can draft after the target's cache now."""
        ...

    def draft(self, last: int, k: int, *, min_confidence: float = 0.0) -> list[int]:
        """Up to k greedy tokens after the target's cache and `last` (not cached yet)."""
        ...


@runtime_checkable
class DraftsWithHead(Protocol):
    """A drafter that drafts with a head over the target's hidden state (head.py's
    HeadDrafter): what `Listing.reads_target` promises, and `Drafters.heads()` collects."""

    head: Head
