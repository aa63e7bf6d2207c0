"""The lifecycle every draft over the target's hidden state shares: a context beside the
target's, started and freed with it, following the target's cache from its first token."""

from __future__ import annotations

import abc
import ctypes
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import llama_cpp
import numpy as np

from specchat.engine.llamacpp import staging_api
from specchat.engine.llamacpp.beside_target import free_draft
from specchat.engine.llamacpp.head_state import HeadState, KeptCall, merged

if TYPE_CHECKING:
    from specchat.engine.llamacpp.ext_batch import ExtBatch
    from specchat.engine.llamacpp.model import LlamaModel

#: Rows of target hidden state kept by position: a verify pass's, and the row before it.
KEEP_ROWS = 256
#: Target positions a head keeps unfed at most (plain rounds, other drafters' passes, a
#: prompt): past it they are fed in one batch, so what it holds stays bounded (a row each:
#: 4–30 KB at real sizes) and a catch-up never outgrows a batch by much.
UNFED_ROWS = 1024


class HiddenStateHead(abc.ABC):
    """A draft that reads its target's hidden state (an MTP head, a Gemma 4 assistant, an
    EAGLE-3 or DFlash draft), driven as llama.cpp's common/speculative.cpp drives its kind.

    It starts (`_start`, its kind's own set-up) over `weights` (None: the target's own), then
    follows the target's cache: what the target cached before it existed has no hidden
    states here, so the target reads it again. `close` stops following, turns off the
    target layers it asked the target to keep, and frees its batch, context and weights.
    It keeps what it reads of each target call (`_capture`) and is fed it at its next
    catch-up (`catch_up`: before it drafts, or past UNFED_ROWS), so a head left unused costs
    the target's passes nothing. Each kind says what it reads of a call, how it is fed it
    (`_feed`), what a drop does to what it was fed (`_dropped`), whether it can draft once
    fed (`_ready_now`) and how it drafts (`_draft`).

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
        # Calls kept for the next catch-up, the target positions held or kept, those fed,
        # and whether the next call is fed at once (the verify pass of its own draft).
        self._unfed: list[KeptCall] = []
        self._covered = 0
        self._fed_end = 0
        self._follow_next = False
        self._lost = False
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
    def decoded(self, tokens: Sequence[int], start: int) -> None:
        """`tokens` were evaluated at positions start, start + 1, ... in one target call:
        what the head reads of it is taken now (the target's outputs are overwritten by its
        next call) and fed to the head at its next catch-up, or now where the head drafted
        this call (a verify pass of its own draft: it drafts again next round)."""
        if start != self._covered:
            # The target holds positions the head never saw (a state adopted without the
            # head's): it cannot follow until the target's cache starts again.
            self._lost = True
        if self._lost:
            return
        self._unfed.append(KeptCall(start, list(tokens), self._capture(tokens, start)))
        self._covered = start + len(tokens)
        if self._follow_next or self.lag > UNFED_ROWS:
            self.catch_up()
        self._follow_next = False

    def dropped(self, n_keep: int) -> None:
        """Every token the target cached from position n_keep on was dropped."""
        kept: list[KeptCall] = []
        for call in self._unfed:
            if call.start >= n_keep:
                continue
            if call.start + len(call.tokens) > n_keep:
                call = call.cut(n_keep - call.start)
            kept.append(call)
        self._unfed = kept
        self._covered = min(self._covered, n_keep)
        if n_keep == 0:
            self._lost = False
        if n_keep <= self._fed_end:
            self._fed_end = n_keep
            self._dropped(n_keep)
        self._follow_next = False

    def _forget_all(self) -> None:
        self._unfed = []
        self._covered = self._fed_end = 0
        self._lost = False
        self._dropped(0)

    @property
    def lag(self) -> int:
        """Target positions the head has kept but not yet been fed (its next catch-up)."""
        return self._covered - self._fed_end

    def catch_up(self) -> int:
        """Feed the head every call it kept, contiguous ones in one batch of at most the
        target's batch size; returns the positions fed."""
        calls, self._unfed = self._unfed, []
        fed = 0
        for call in merged(calls, self.target.n_batch):
            self._feed(call.tokens, call.start, call.data)
            self._fed_end = call.start + len(call.tokens)
            fed += len(call.tokens)
        return fed

    @abc.abstractmethod
    def _capture(self, tokens: Sequence[int], start: int) -> np.ndarray:
        """What the head reads of a target call, one row per token (the target's rows or
        layer features), read before the target's next call overwrites them."""

    @abc.abstractmethod
    def _feed(self, tokens: Sequence[int], start: int, data: np.ndarray) -> None:
        """Run the head over positions start, start + 1, ... of the target's cache (rows
        `data`, as `_capture` took them), following on from what it was fed before."""

    @abc.abstractmethod
    def _dropped(self, n_keep: int) -> None:
        """Every position from n_keep on that the head was fed was dropped."""

    # --- kept states -----------------------------------------------------------------------------
    @property
    def source(self) -> str:
        """Which head this is, as a kept state names it: its drafter and its weights file
        (path, size, time written), so a state kept beside another head is never adopted."""
        stat = self.path.stat()
        return f"{self.serves}|{self.path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"

    def state(self) -> HeadState:
        """What the head holds now, to come back to with the target's kept state (a
        prefix-cache snapshot, a conversation kept on disk): its own cache and rows, and
        what it has yet to be fed."""
        data = b""
        if self._own_cache:
            size = int(llama_cpp.llama_state_seq_get_size(self._ctx, 0))
            if size > 0:
                buffer = (ctypes.c_ubyte * size)()
                written = int(llama_cpp.llama_state_seq_get_data(self._ctx, buffer, size, 0))
                data = bytes(buffer)[: max(written, 0)]
        return HeadState(
            covered=self._covered,
            fed_end=self._fed_end,
            cache=data,
            unfed=tuple(self._unfed),
            fields=self._fields(),
            source=self.source,
        )

    def adopt(self, state: HeadState) -> bool:
        """Come back to `state` after the target adopted the state it was kept with (the
        target's cache holds its first `state.covered` tokens); False where llama.cpp
        refused the head's cache or the state is another head's (the head then starts
        again, as before a restore)."""
        self._forget_all()
        if state.covered > self.target.n_past or state.source != self.source:
            self._lost = True
            return False
        if state.cache:
            buffer = (ctypes.c_ubyte * len(state.cache)).from_buffer_copy(state.cache)
            if not int(llama_cpp.llama_state_seq_set_data(self._ctx, buffer, len(state.cache), 0)):
                self._forget_all()
                self._lost = True
                return False
        self._covered, self._fed_end = state.covered, state.fed_end
        self._unfed = list(state.unfed)
        self._set_fields(state.fields)
        return True

    @property
    def _own_cache(self) -> bool:
        """Whether it keeps a cache of its own (the MTP head, EAGLE-3, DFlash; not a Gemma 4
        assistant, which reads the target's)."""
        return True

    def _fields(self) -> dict[str, Any]:
        """Its kind's own bookkeeping, as `state` keeps it (copies: the head goes on)."""
        return {}

    def _set_fields(self, fields: dict[str, Any]) -> None:  # noqa: B027  # optional: empty
        """Its kind's own bookkeeping back from `_fields`."""

    # --- drafting ----------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        """Whether it can draft after the target's cache now (after a catch-up): it holds
        or has kept every position the target cached."""
        if self._lost or self.target.n_past == 0 or self._covered != self.target.n_past:
            return False
        return bool(self._unfed) or self._ready_now()

    def draft(self, last: int, k: int, *, min_confidence: float = 0.0) -> list[int]:
        """Up to k greedy tokens after the target's cache and `last` (not cached yet), after
        a catch-up; the target's next call (the verify pass) is fed at once."""
        if not self.ready or k <= 0:
            return []
        self.catch_up()
        self._follow_next = True
        return self._draft(last, k, min_confidence=min_confidence)

    @abc.abstractmethod
    def _ready_now(self) -> bool:
        """Whether, fed up to the target's cache, it can draft (it has the last row)."""

    @abc.abstractmethod
    def _draft(self, last: int, k: int, *, min_confidence: float) -> list[int]:
        """Its kind's draft, fed up to the target's cache."""
