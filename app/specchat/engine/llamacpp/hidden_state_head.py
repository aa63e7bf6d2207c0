"""The lifecycle every draft over the target's hidden state shares: a context beside the
target's, started and freed with it, following the target's cache from its first token."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specchat.engine.llamacpp import staging_api
from specchat.engine.llamacpp.beside_target import free_draft

if TYPE_CHECKING:
    from specchat.engine.llamacpp.ext_batch import ExtBatch
    from specchat.engine.llamacpp.model import LlamaModel

#: Rows of target hidden state kept by position: a verify pass's, and the row before it.
KEEP_ROWS = 256


class HiddenStateHead(abc.ABC):
    """A draft that reads its target's hidden state (an MTP head, a Gemma 4 assistant, an
    EAGLE-3 or DFlash draft), driven as llama.cpp's common/speculative.cpp drives its kind.

    It starts (`_start`, its kind's own set-up) over `weights` (None: the target's own), then
    follows the target's cache: what the target cached before it existed has no hidden
    states here, so the target reads it again. `close` stops following, turns off the
    target layers it asked the target to keep, and frees its batch, context and weights.
    Each kind says what it does with a decode call (`decoded`), a drop (`dropped`), whether
    it can draft now (`ready`) and how it drafts (`draft`).

    Attributes:
        target: the model it drafts for (it follows its cache).
        name: how errors name it.
        path: the file its weights come from (the target's, for an MTP head): what its
            stored cost table is keyed by.
        serves: the name of the drafter that drafts with it (a registry name): how a
            drafter finds the head loaded beside the target that is its own.
        n_max: the most tokens it drafts in one round (None: as many as asked).
    """

    n_max: int | None = None

    def __init__(
        self, target: LlamaModel, weights: Any, *, name: str, path: Path | None, serves: str
    ) -> None:
        self.target = target
        self.name = name
        self.path = path if path is not None else target.path
        self.serves = serves
        self._weights = weights
        self._ctx: Any = None
        self._batch: ExtBatch | None = None
        # Target layers whose inputs the target keeps for it (turned off again on close).
        self._layers: list[int] = []
        self._n_layer_target = 0
        try:
            self._start(target, weights)
            if target.n_past:
                # What the target cached before the head existed has no hidden states here:
                # it is read again, so the head's cache mirrors the target's from the start.
                target.truncate(0)
            target.follow(self)
        except BaseException:
            self.close()
            raise

    @abc.abstractmethod
    def _start(self, target: LlamaModel, weights: Any) -> None:
        """Its kind's set-up: checks, its context and batch, what the target must keep."""

    # --- lifetime ----------------------------------------------------------------------------
    def close(self) -> None:
        self.target.unfollow(self)
        if self._layers and self.target.context is not None:
            for layer in self._layers:
                if layer < self._n_layer_target:
                    staging_api.set_embeddings_layer_inp(self.target.context, layer, False)
            self._layers = []
        free_draft(self._batch, self._ctx, self._weights)
        self._batch = self._ctx = self._weights = None

    # --- following the target's cache ----------------------------------------------------------
    @abc.abstractmethod
    def decoded(self, tokens: Sequence[int], start: int) -> None:
        """`tokens` were evaluated at positions start, start + 1, ... in one target call."""

    @abc.abstractmethod
    def dropped(self, n_keep: int) -> None:
        """Every token the target cached from position n_keep on was dropped."""

    # --- drafting ----------------------------------------------------------------------------
    @property
    @abc.abstractmethod
    def ready(self) -> bool:
        """Whether it can draft after the target's cache now."""

    @abc.abstractmethod
    def draft(self, last: int, k: int, *, min_confidence: float = 0.0) -> list[int]:
        """Up to k greedy tokens after the target's cache and `last` (not cached yet)."""
