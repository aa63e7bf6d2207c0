"""What the tests of drafter architectures need from llama.cpp beyond LlamaModel.

- ctypes bindings of the staging API that src/llama-ext.h declares with C++ linkage (the
  nextn embeddings, a layer's input embeddings): libllama exports them only under their
  Itanium-mangled names, which llama-cpp-python does not bind.
- ExtBatch, over the llama_batch_ext_* API: tokens with an embedding attached, or rows of
  embeddings alone, as common/speculative.cpp's drafters build them for llama_process.
- Raw loads and contexts with the fields LlamaModel does not set (load_mtp, ctx_type,
  ctx_other, n_rs_seq), always with one thread.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import llama_cpp
import numpy as np

from specchat.engine.llamacpp.backend import ensure_backend

_FLOAT_P = ctypes.POINTER(ctypes.c_float)

#: name -> (mangled symbol, argument types, result type)
_SIGNATURES: dict[str, tuple[str, list[Any], Any]] = {
    "set_embeddings_nextn": (
        "_Z26llama_set_embeddings_nextnP13llama_contextbb",
        [ctypes.c_void_p, ctypes.c_bool, ctypes.c_bool],
        None,
    ),
    "get_embeddings_nextn": (
        "_Z26llama_get_embeddings_nextnP13llama_context",
        [ctypes.c_void_p],
        _FLOAT_P,
    ),
    "get_embeddings_nextn_ith": (
        "_Z30llama_get_embeddings_nextn_ithP13llama_contexti",
        [ctypes.c_void_p, ctypes.c_int32],
        _FLOAT_P,
    ),
    "set_embeddings_layer_inp": (
        "_Z30llama_set_embeddings_layer_inpP13llama_contextjb",
        [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_bool],
        None,
    ),
    "get_embeddings_layer_inp": (
        "_Z30llama_get_embeddings_layer_inpP13llama_contextj",
        [ctypes.c_void_p, ctypes.c_uint32],
        _FLOAT_P,
    ),
    "get_ctx_other": (
        "_Z19llama_get_ctx_otherP13llama_context",
        [ctypes.c_void_p],
        ctypes.c_void_p,
    ),
}
_bound: dict[str, Any] = {}


def _ext(name: str) -> Any:
    if name not in _bound:
        symbol, argtypes, restype = _SIGNATURES[name]
        function = getattr(llama_cpp.llama_cpp._lib, symbol)
        function.argtypes, function.restype = argtypes, restype
        _bound[name] = function
    return _bound[name]


def _rows(pointer: Any, n_rows: int, n_embd: int) -> np.ndarray:
    if not pointer:
        raise RuntimeError("llama.cpp returned no embeddings")
    return np.ctypeslib.as_array(pointer, shape=(n_rows, n_embd)).copy()


def set_embeddings_nextn(ctx: Any, value: bool, *, masked: bool) -> None:
    """Output the nextn (MTP input) embeddings: `masked` only for rows that ask for output."""
    _ext("set_embeddings_nextn")(ctx, value, masked)


def embeddings_nextn(ctx: Any, n_rows: int, n_embd: int) -> np.ndarray:
    """The last llama_process / llama_decode's nextn embeddings, (n_rows, n_embd)."""
    return _rows(_ext("get_embeddings_nextn")(ctx), n_rows, n_embd)


def embeddings_nextn_ith(ctx: Any, i: int, n_embd: int) -> np.ndarray:
    """Row `i` of the nextn embeddings (negative counts from the end)."""
    return _rows(_ext("get_embeddings_nextn_ith")(ctx, i), 1, n_embd)[0]


def set_embeddings_layer_inp(ctx: Any, layer: int, value: bool) -> None:
    """Keep the input of `layer` (the hidden state after layer - 1) for every batch row."""
    _ext("set_embeddings_layer_inp")(ctx, layer, value)


def embeddings_layer_inp(ctx: Any, layer: int, n_rows: int, n_embd: int) -> np.ndarray:
    return _rows(_ext("get_embeddings_layer_inp")(ctx, layer), n_rows, n_embd)


def ctx_other(ctx: Any) -> int | None:
    """The context a context was created beside (its ctx_other), as an address."""
    return _ext("get_ctx_other")(ctx)


class ExtBatch:
    """A llama_batch_ext for one context; keeps the embeddings it was handed alive until
    it is processed. `n_pos` is 4 for an M-RoPE model (positions {p, 0, 0, 0} for a
    token, {p, p, p, 0} for an embeddings row, as common_batch and the DFlash driver use)."""

    def __init__(self, ctx: Any, *, n_pos: int = 1) -> None:
        self._ctx = ctx
        self._batch = llama_cpp.llama_batch_ext_init(ctx)
        self._n_pos = n_pos
        self._kept: list[np.ndarray] = []

    def _positions(self, pos: int, *, embd_row: bool) -> Any:
        if self._n_pos == 1:
            return (llama_cpp.llama_pos * 1)(pos)
        rest = (pos, pos, 0) if embd_row else (0, 0, 0)
        return (llama_cpp.llama_pos * 4)(pos, *rest)

    def _embd(self, row: np.ndarray) -> Any:
        row = np.ascontiguousarray(row, dtype=np.float32)
        self._kept.append(row)
        return llama_cpp.llama_embd(row.ctypes.data_as(_FLOAT_P), 1, row.shape[-1])

    def add_token(
        self, token: int, pos: int, *, embd: np.ndarray | None = None, output: bool = False
    ) -> int:
        """Add `token` at `pos` of sequence 0, with `embd` attached (MTP's hidden state,
        EAGLE-3's g); returns its index."""
        idx = llama_cpp.llama_batch_ext_add_token(self._batch, 0, token)
        assert idx >= 0, f"llama_batch_ext_add_token returned {idx}"
        llama_cpp.llama_batch_ext_set_pos(self._batch, idx, self._positions(pos, embd_row=False))
        if embd is not None:
            assert llama_cpp.llama_batch_ext_set_embd_token(self._batch, idx, self._embd(embd))
        if output:
            llama_cpp.llama_batch_ext_set_output_logits(self._batch, idx, True)
        return idx

    def add_embd(self, row: np.ndarray, pos: int, *, output: bool = False) -> int:
        """Add a row of embeddings alone (target features) at `pos` of sequence 0."""
        idx = llama_cpp.llama_batch_ext_add_embd(self._batch, 0, self._embd(row))
        assert idx >= 0, f"llama_batch_ext_add_embd returned {idx}"
        llama_cpp.llama_batch_ext_set_pos(self._batch, idx, self._positions(pos, embd_row=True))
        if output:
            llama_cpp.llama_batch_ext_set_output_logits(self._batch, idx, True)
        return idx

    def process(self, kind: int = llama_cpp.LLAMA_PROCESS_TYPE_DECODE) -> int:
        """llama_process the batch (0 is success), then empty it."""
        status = int(llama_cpp.llama_process(self._ctx, kind, self._batch))
        llama_cpp.llama_batch_ext_clear(self._batch)
        self._kept.clear()
        return status

    def close(self) -> None:
        if self._batch:
            llama_cpp.llama_batch_ext_free(self._batch)
            self._batch = None


def logits(ctx: Any, n_vocab: int, i: int = -1) -> np.ndarray:
    """Row `i` of a context's last logits, copied."""
    pointer = llama_cpp.llama_get_logits_ith(ctx, i)
    return np.ctypeslib.as_array(pointer, shape=(n_vocab,)).copy()


@contextmanager
def loaded(path: Path, **fields: Any) -> Iterator[Any]:
    """A model loaded with llama_model_params `fields` (load_mtp=True, ...), freed after."""
    ensure_backend()
    params = llama_cpp.llama_model_default_params()
    for name, value in fields.items():
        setattr(params, name, value)
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
    assert model, f"llama.cpp could not load {path.name}"
    try:
        yield model
    finally:
        llama_cpp.llama_model_free(model)


def context_params(n_ctx: int = 512, **fields: Any) -> Any:
    """Context parameters with one thread and `fields` (ctx_type, ctx_other, n_rs_seq...)."""
    params = llama_cpp.llama_context_default_params()
    params.n_ctx = n_ctx
    params.n_batch = params.n_ubatch = n_ctx
    params.n_threads = params.n_threads_batch = 1
    params.no_perf = True
    for name, value in fields.items():
        setattr(params, name, value)
    return params


@contextmanager
def context(model: Any, n_ctx: int = 512, **fields: Any) -> Iterator[Any]:
    """A context over `model` (see context_params), freed after; fails if none is made."""
    ctx = llama_cpp.llama_init_from_model(model, context_params(n_ctx, **fields))
    assert ctx, "llama.cpp made no context"
    try:
        yield ctx
    finally:
        llama_cpp.llama_free(ctx)


def decode_prompt(ctx: Any, tokens: Sequence[int], *, all_logits: bool = False) -> None:
    """llama_decode `tokens` at positions 0.. of sequence 0 (the last one with logits)."""
    batch = llama_cpp.llama_batch_init(len(tokens), 0, 1)
    try:
        batch.n_tokens = len(tokens)
        for i, token in enumerate(tokens):
            batch.token[i] = token
            batch.pos[i] = i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = all_logits or i == len(tokens) - 1
        status = llama_cpp.llama_decode(ctx, batch)
        assert status == 0, f"llama_decode returned {status}"
    finally:
        llama_cpp.llama_batch_free(batch)
