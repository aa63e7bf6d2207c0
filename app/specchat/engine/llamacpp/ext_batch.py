"""A llama_batch_ext for one context: tokens (with an embedding attached or not) and rows of
embeddings alone, as common/speculative.cpp's drafters build them (its common_batch) for
llama_process."""

from __future__ import annotations

import ctypes
from typing import Any

import llama_cpp
import numpy as np

_FLOAT_P = ctypes.POINTER(ctypes.c_float)

#: Positions per batch entry of an M-RoPE model (GGML_MROPE_SECTIONS).
MROPE_SECTIONS = 4


def positions_per_entry(model: Any) -> int:
    """How many positions each entry carries for `model`: four for an M-RoPE one."""
    rope = llama_cpp.llama_model_rope_type(model)
    mrope = (llama_cpp.LLAMA_ROPE_TYPE_MROPE, llama_cpp.LLAMA_ROPE_TYPE_IMROPE)
    return MROPE_SECTIONS if rope in mrope else 1


class ExtBatch:
    """One batch, refilled for each llama_process; keeps the embeddings handed to it alive
    until then.

    Positions follow common_batch: a token at p is {p, 0, 0, 0}, an embeddings row carries
    the positions it is given (a DFlash feature row {p, p, p, 0}).
    """

    def __init__(self, ctx: Any, *, n_pos: int = 1, name: str = "draft") -> None:
        self._ctx = ctx
        self._name = name
        self._n_pos = n_pos
        self._batch = llama_cpp.llama_batch_ext_init(ctx)
        if not self._batch:
            raise RuntimeError(f"the {name} could not make a batch")
        self._kept: list[np.ndarray] = []
        self.size = 0

    def _positions(self, positions: tuple[int, ...]) -> Any:
        full = (*positions, *(0,) * self._n_pos)[: self._n_pos]
        return (llama_cpp.llama_pos * self._n_pos)(*full)

    def _embd(self, row: np.ndarray) -> Any:
        row = np.ascontiguousarray(row, dtype=np.float32)
        self._kept.append(row)
        return llama_cpp.llama_embd(row.ctypes.data_as(_FLOAT_P), 1, row.shape[-1])

    def add_token(
        self, token: int, pos: int, *, embd: np.ndarray | None = None, output: bool = False
    ) -> int:
        """`token` at `pos` of sequence 0, with `embd` attached (EAGLE-3's g); its index."""
        index = int(llama_cpp.llama_batch_ext_add_token(self._batch, 0, token))
        if index < 0:
            raise RuntimeError(f"the {self._name}'s batch refused a token ({index})")
        llama_cpp.llama_batch_ext_set_pos(self._batch, index, self._positions((pos,)))
        if embd is not None and not llama_cpp.llama_batch_ext_set_embd_token(
            self._batch, index, self._embd(embd)
        ):
            raise RuntimeError(f"the {self._name}'s batch refused an embedding")
        if output:
            llama_cpp.llama_batch_ext_set_output_logits(self._batch, index, True)
        self.size += 1
        return index

    def add_embd(self, row: np.ndarray, positions: tuple[int, ...], *, output: bool) -> int:
        """A row of embeddings alone (target features) at `positions`; its index."""
        index = int(llama_cpp.llama_batch_ext_add_embd(self._batch, 0, self._embd(row)))
        if index < 0:
            raise RuntimeError(f"the {self._name}'s batch refused an embeddings row ({index})")
        llama_cpp.llama_batch_ext_set_pos(self._batch, index, self._positions(positions))
        if output:
            llama_cpp.llama_batch_ext_set_output_logits(self._batch, index, True)
        self.size += 1
        return index

    def clear(self) -> None:
        llama_cpp.llama_batch_ext_clear(self._batch)
        self._kept.clear()
        self.size = 0

    def process(self, kind: int = llama_cpp.LLAMA_PROCESS_TYPE_DECODE) -> None:
        """llama_process the batch (raises on failure), then empty it."""
        try:
            status = int(llama_cpp.llama_process(self._ctx, kind, self._batch))
        finally:
            self.clear()
        if status != 0:
            raise RuntimeError(f"the {self._name}'s pass failed with status {status}")

    def close(self) -> None:
        if self._batch:
            llama_cpp.llama_batch_ext_free(self._batch)
            self._batch = None
