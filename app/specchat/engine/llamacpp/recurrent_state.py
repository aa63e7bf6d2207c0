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
from collections.abc import Sequence
from typing import Any

import llama_cpp

#: Recurrent-state snapshots asked of a model that supports them: the longest draft that can
#: be dropped without a checkpoint (longer ones fall back to one).
SNAPSHOT_DEPTH = 16
#: Memory the states kept at prompts' ends may take together (PromptEnds): about five of
#: the 4B shape's 50 MiB state; and how many it keeps at most (eight of the 0.8B's 19 MiB).
PROMPT_ENDS_BYTES = 256 << 20
PROMPT_ENDS = 8
#: Of those, how many a kept state carries at least (a prefix-cache snapshot, a conversation
#: on disk): the last prompt's end, where the next turn parts, and the one before it (a
#: regenerate, an edit of the last turn); each is a whole state (50 MiB on the 4B shape).
KEPT_ENDS = 2
#: Why a speculative answer at T = 0 can part from plain at a near-tie on a hybrid target
#: whatever its keys. In the llama.cpp SpecChat builds on (0.3.36's vendored tree), a verify
#: pass's Gated DeltaNet layers run the same sequential kernel as a one-token pass (both build
#: ggml_gated_delta_net: src/llama-context.cpp sets fused_gdn_ar and fused_gdn_ch; the CPU
#: kernel in ggml-cpu/ops.cpp walks the tokens one by one), so they agree row for row; its
#: matrix products do not: a pass of many rows runs the batched (gemm) kernels, one token
#: the gemv ones, which round differently, as on any target whose quantisation has no
#: exact batched path (K-quants). Measured on random-weight real shapes: answers parted at
#: margins of 0.10–0.17 between the top two tokens (docs/formats.md).
HYBRID_NEAR_TIES = (
    "On this hybrid target a speculative answer can part from plain at a near-tie whatever "
    "the keys: a verify pass's matrix products over many rows round differently from a "
    "one-token pass's (its recurrent layers run the same kernel either way)."
)
#: A prompt's last tokens read after the state at its end is kept: a later prompt parts from
#: this one within them (the generation prompt, a thinking opener it drops later).
PROMPT_TAIL = 16


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

    def export(self) -> tuple[int, bytes] | None:
        """Its position and saved state, to keep beside a kept cache (None: nothing saved)."""
        if self.position is None:
            return None
        return self.position, bytes(self._buffer)[: self.size]

    def load(self, position: int, data: bytes) -> None:
        """Take a state `export` gave back (the cache it describes was adopted)."""
        self._buffer = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        self.size = len(data)
        self.position = position


def restore_latest(checkpoints: Sequence[StateCheckpoint], n_keep: int) -> int | None:
    """Put back the latest of `checkpoints` at or before n_keep; its position, or None where
    none is (or llama.cpp refused it)."""
    usable = [c for c in checkpoints if c.position is not None and c.position <= n_keep]
    for checkpoint in sorted(usable, key=lambda c: c.position or 0, reverse=True):
        if checkpoint.restore():
            return checkpoint.position
    return None


class PromptEnds:
    """A recurrent model's states kept at its prompts' ends, so a later prompt that parts
    from this chat within an answer (a template that drops earlier thinking), at an edited
    turn or at a regenerate, comes back to the latest one before it rather than reading the
    chat from its start. The oldest go first past `max_bytes`.

    Attributes:
        saved: the kept states, oldest first.
        max_bytes: the memory they may take together.
    """

    def __init__(self, ctx: Any, *, max_bytes: int = PROMPT_ENDS_BYTES) -> None:
        self._ctx = ctx
        self.max_bytes = max_bytes
        self.saved: list[StateCheckpoint] = []

    @property
    def size_bytes(self) -> int:
        return sum(c.size for c in self.saved)

    def save(self, position: int) -> None:
        """Keep the state as it is now, `position` tokens in."""
        if any(c.position == position for c in self.saved):
            return
        checkpoint = StateCheckpoint(self._ctx)
        if checkpoint.save(position):
            self.saved.append(checkpoint)
        while len(self.saved) > PROMPT_ENDS or (
            len(self.saved) > 1 and self.size_bytes > self.max_bytes
        ):
            self.saved.pop(_least_useful([c.position or 0 for c in self.saved]))

    def forget_from(self, position: int) -> None:
        """The cache went back to `position`: states after it describe nothing now."""
        self.saved = [c for c in self.saved if c.position is not None and c.position <= position]

    def export(self, last: int = KEPT_ENDS) -> list[tuple[int, bytes]]:
        """The `last` kept states' positions and bytes, to keep beside a kept cache."""
        return [e for c in self.saved[-last:] if (e := c.export()) is not None]

    def spread(self, max_bytes: int) -> list[tuple[int, bytes]]:
        """The kept states to carry beside a kept cache in `max_bytes`: the last KEPT_ENDS
        always, and as many earlier ones as fit, thinned as `save` thins them, so an edit of
        any earlier turn reads from a state near it."""
        chosen = [e for c in self.saved if (e := c.export()) is not None]
        while len(chosen) > KEPT_ENDS and sum(len(data) for _, data in chosen) > max_bytes:
            chosen.pop(_least_useful([position for position, _ in chosen]))
        return chosen

    def load(self, states: Sequence[tuple[int, bytes]]) -> None:
        """Take what `export` gave (the cache they describe was adopted)."""
        self.saved = []
        for position, data in states:
            checkpoint = StateCheckpoint(self._ctx)
            checkpoint.load(position, data)
            self.saved.append(checkpoint)


def _least_useful(positions: Sequence[int]) -> int:
    """Which of the states at `positions` (ascending) to drop: an edit reads from the latest
    state before it, so the worst re-read is the widest gap between kept states (the chat's
    start counting as one); the state whose loss widens it least goes. The last KEPT_ENDS
    are never chosen while an earlier one remains."""
    candidates = range(max(1, len(positions) - KEPT_ENDS))

    def merged_gap(i: int) -> int:
        before = positions[i - 1] if i else 0
        return positions[i + 1] - before

    return min(candidates, key=merged_gap)


def prompt_tail(rollback: Rollback, n_tokens: int, cached: int) -> int:
    """Where a recurrent model's read of a prompt of `n_tokens` stops for `mark_prompt`:
    PROMPT_TAIL before its end (a later prompt parts from it within its generation prompt),
    or where its cache stands already; `cached` for an attention cache (no stop)."""
    if rollback is Rollback.CACHE:
        return cached
    return max(cached, n_tokens - PROMPT_TAIL)


def state_copies(snapshot_depth: int, state_bytes: int) -> int:
    """Copies of a recurrent state a loaded model holds at most: llama.cpp's snapshot cells
    (n_rs_seq + 1, the live state among them), the round's checkpoint, and the states kept
    at prompts' ends within their budget (0 for an attention model)."""
    if state_bytes <= 0:
        return 0
    return snapshot_depth + 2 + max(1, min(PROMPT_ENDS, PROMPT_ENDS_BYTES // state_bytes))
