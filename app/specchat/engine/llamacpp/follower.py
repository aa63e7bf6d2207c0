"""What follows a model's cache: told of every decode call and every drop."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol


class CacheFollower(Protocol):
    """Something whose own state mirrors a model's cache (an MTP head's cache)."""

    def decoded(self, tokens: Sequence[int], start: int) -> None:
        """`tokens` were evaluated at positions start, start + 1, ... in one decode call."""

    def dropped(self, n_keep: int) -> None:
        """Every cached token from position n_keep on was dropped."""

    def state(self) -> Any:
        """What it holds now, kept beside the model's state (a prefix-cache snapshot)."""

    def adopt(self, state: Any) -> bool:
        """Come back to `state` once the model adopted the state it was kept with."""

    def close(self) -> None:
        """The model is closing: free what runs over its weights."""
