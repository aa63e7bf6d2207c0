"""What the round loop and the drafters read of a model: `Target` (the model that verifies)
and `DraftModel` (the one a drafter runs). `LlamaModel` is both; a replay's recorded target
and draft model (bench/hindsight/recorded_target.py, the draft model's package) stand in for
them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    # Only for annotations: a replay's stand-ins satisfy these without loading llama_cpp.
    from specchat.engine.llamacpp.follower import CacheFollower
    from specchat.engine.llamacpp.recurrent_state import Rollback


class DraftModel(Protocol):
    """A model a drafter runs: its cache, read and rolled back, and its logits.

    Attributes:
        path: its file (where a message names it).
        n_ctx: its context window.
        can_rollback: whether its cache can drop tokens (a drafter needs it to).
    """

    @property
    def path(self) -> Path: ...

    @property
    def n_ctx(self) -> int: ...

    @property
    def can_rollback(self) -> bool: ...

    @property
    def n_past(self) -> int:
        """Tokens its cache holds."""
        ...

    def cached_prefix(self, tokens: Sequence[int]) -> int:
        """How many of `tokens` its cache holds already, from the start."""
        ...

    def sync(self, tokens: Sequence[int]) -> int:
        """Drop what its cache holds past `tokens`' common prefix; that prefix's length."""
        ...

    def decode(self, tokens: Sequence[int], *, logits: str = "last") -> np.ndarray:
        """Evaluate `tokens` after the cache: logits of "all" rows, the "last" or "none"."""
        ...

    def truncate(self, n_keep: int) -> None:
        """Keep the cache's first n_keep tokens."""
        ...

    def mark(self, rows: int | None = None) -> None:
        """Before a pass whose rows may be dropped: what a recurrent cache needs to roll back."""
        ...

    def mark_prompt(self) -> None:
        """At a prompt's end (or near it): a recurrent cache keeps its state here, where a
        later prompt may part from this one."""
        ...


class Placement(Protocol):
    """Where a model's layers run (llamacpp/load.py's LoadInfo says it of a loaded one)."""

    @property
    def gpu_layers(self) -> int:
        """Layers on a GPU (0: it runs on the CPU)."""
        ...


class Target(DraftModel, Protocol):
    """The model that verifies: what the decoder's round loop, the policies and the drafters
    read of it.

    Attributes:
        info: where its layers run (a GPU's passes are priced as a GPU's).
        n_vocab: rows of its logits.
        max_branches: the most paths one tree pass checks (1: no trees).
        rollback: how its cache drops rejected drafts (recurrent_state.Rollback).
        snapshot_depth: the draft rows a recurrent cache can drop by its snapshots.
    """

    @property
    def info(self) -> Placement: ...

    @property
    def n_vocab(self) -> int: ...

    @property
    def max_branches(self) -> int: ...

    @property
    def rollback(self) -> Rollback: ...

    @property
    def snapshot_depth(self) -> int: ...

    def room(self) -> int:
        """Tokens its context has room for after the cache."""
        ...

    def decode(
        self, tokens: Sequence[int], *, logits: str = "last", copy: bool = True
    ) -> np.ndarray:
        """As DraftModel.decode; `copy=False` may lend rows that only stay valid until the
        next decode (the round loop reads a verify pass's rows at once)."""
        ...

    def decode_tree(self, paths: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """Evaluate several paths after the cache in one pass: each path's logits."""
        ...

    def keep_path(self, path: int, n_keep: int) -> None:
        """After decode_tree: keep the first n_keep tokens of path `path` in the cache."""
        ...

    def is_eog(self, token: int) -> bool:
        """Whether `token` ends an answer."""
        ...

    def piece(self, token: int) -> bytes:
        """`token`'s text, as bytes."""
        ...

    def follow(self, follower: CacheFollower) -> None:
        """Tell `follower` of every decode and drop from now on (a head over its hidden
        state); tree passes stop."""
        ...
