"""Taking back rejected drafts from a recurrent or hybrid model's cache.

An attention cache keeps one entry per token and drops its last ones on request. A recurrent
layer (Mamba, RWKV, Gated DeltaNet...) keeps one state per sequence, updated token by token,
so the state before the dropped tokens must come from somewhere:

- snapshots: llama.cpp keeps the states after each of a decode call's last
  `n_rs_seq` + 1 tokens (`llama_context_params.n_rs_seq`, for the architectures that
  support it) and drops tokens natively, but only tokens of the last decode call: slots it
  did not write hold older states, and llama.cpp does not check that.
- a checkpoint: the recurrent part of the state saved before a pass
  (`llama_state_seq_get_data_ext` with PARTIAL_ONLY), restored after it, and the kept
  tokens evaluated again.
"""

from __future__ import annotations

import ctypes
import enum
from typing import Any

import llama_cpp

#: Recurrent-state snapshots asked of a model that supports them: the longest draft that can
#: be dropped without a checkpoint (longer ones fall back to one).
SNAPSHOT_DEPTH = 16


class Rollback(enum.Enum):
    """How a model's cache drops its last tokens."""

    CACHE = "cache"  # an attention cache: natively, any number
    SNAPSHOTS = "snapshots"  # recurrent state snapshots: the last call's tokens, up to a depth
    CHECKPOINT = "checkpoint"  # a saved recurrent state, then the kept tokens again


class StateCheckpoint:
    """The recurrent part of sequence 0's state at one position, to come back to.

    Attributes:
        position: the tokens cached when it was saved (None: nothing saved).
        size: bytes of the last save.
    """

    def __init__(self, ctx: Any) -> None:
        self._ctx = ctx
        self._buffer: Any = None
        self.position: int | None = None
        self.size = 0

    def save(self, position: int) -> bool:
        """Save the state as it is now, `position` tokens in; False where llama.cpp cannot."""
        flags = llama_cpp.LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY
        size = int(llama_cpp.llama_state_seq_get_size_ext(self._ctx, 0, flags))
        if size <= 0:
            self.position = None
            return False
        if self._buffer is None or len(self._buffer) < size:
            self._buffer = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data_ext(self._ctx, self._buffer, size, 0, flags)
        if written != size:
            self.position = None
            return False
        self.size = size
        self.position = position
        return True

    def restore(self) -> bool:
        """Put the saved state back; False where llama.cpp refused it (nothing restored)."""
        if self.position is None:
            return False
        flags = llama_cpp.LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY
        read = llama_cpp.llama_state_seq_set_data_ext(self._ctx, self._buffer, self.size, 0, flags)
        return bool(read)

    def forget_from(self, position: int) -> None:
        """The cache went back before the checkpoint: it no longer describes it."""
        if self.position is not None and position < self.position:
            self.position = None
