"""libllama's staging API (llama.cpp's src/llama-ext.h): what a draft head reads of its target.

MTP heads and Gemma 4 assistants draft from the target's last hidden state ("nextn"
embeddings); EAGLE-3 and DFlash drafts from the inputs of a few of its layers, and they need
the draft file's own facts (which layers). llama.cpp declares the functions that expose them
in a C++ header outside its C API, so llama-cpp-python binds none of them, but libllama
exports them: with C++ linkage, under their Itanium-mangled names (the ABI of GCC and Clang
on Linux and macOS). They are bound here by those names; a library built another way (MSVC)
has other names, and then `available()` is False and the drafters that need them are not
offered.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

import llama_cpp.llama_cpp as low_level

_ctx = ctypes.c_void_p
_model = ctypes.c_void_p
_float_p = ctypes.POINTER(ctypes.c_float)

#: name → (mangled name, argument types, result type), from src/llama-ext.h.
_SIGNATURES: dict[str, tuple[str, list[Any], Any]] = {
    "llama_set_embeddings_nextn": (
        "_Z26llama_set_embeddings_nextnP13llama_contextbb",
        [_ctx, ctypes.c_bool, ctypes.c_bool],
        None,
    ),
    "llama_get_embeddings_nextn": (
        "_Z26llama_get_embeddings_nextnP13llama_context",
        [_ctx],
        _float_p,
    ),
    "llama_get_embeddings_nextn_ith": (
        "_Z30llama_get_embeddings_nextn_ithP13llama_contexti",
        [_ctx, ctypes.c_int32],
        _float_p,
    ),
    "llama_set_nextn_layer_offset": (
        "_Z28llama_set_nextn_layer_offsetP13llama_contexti",
        [_ctx, ctypes.c_int32],
        None,
    ),
    "llama_get_ctx_other": ("_Z19llama_get_ctx_otherP13llama_context", [_ctx], _ctx),
    "llama_set_embeddings_layer_inp": (
        "_Z30llama_set_embeddings_layer_inpP13llama_contextjb",
        [_ctx, ctypes.c_uint32, ctypes.c_bool],
        None,
    ),
    "llama_get_embeddings_layer_inp": (
        "_Z30llama_get_embeddings_layer_inpP13llama_contextj",
        [_ctx, ctypes.c_uint32],
        _float_p,
    ),
    "llama_model_target_layer_ids": (
        "_Z28llama_model_target_layer_idsPK11llama_model",
        [_model],
        ctypes.POINTER(ctypes.c_int32),
    ),
    "llama_model_target_layer_ids_n": (
        "_Z30llama_model_target_layer_ids_nPK11llama_model",
        [_model],
        ctypes.c_uint32,
    ),
    "llama_model_dflash_selector_top_k": (
        "_Z33llama_model_dflash_selector_top_kPK11llama_model",
        [_model],
        ctypes.c_int32,
    ),
}

#: What a draft head over the target's last hidden state needs (an MTP head, an assistant).
NEXTN = (
    "llama_set_embeddings_nextn",
    "llama_get_embeddings_nextn",
    "llama_get_embeddings_nextn_ith",
    "llama_set_nextn_layer_offset",
    "llama_get_ctx_other",
)
#: What a draft over the target's layer inputs needs besides (EAGLE-3, DFlash).
LAYER_INPUTS = (
    "llama_set_embeddings_layer_inp",
    "llama_get_embeddings_layer_inp",
    "llama_model_target_layer_ids",
    "llama_model_target_layer_ids_n",
    "llama_model_dflash_selector_top_k",
)


@functools.cache
def _function(name: str) -> Any | None:
    mangled, argtypes, restype = _SIGNATURES[name]
    try:
        function = getattr(low_level._lib, mangled)
    except AttributeError:
        return None
    function.argtypes = argtypes
    function.restype = restype
    return function


def available(names: tuple[str, ...] = NEXTN) -> bool:
    """Whether this libllama exports `names` (by default the nextn functions) under the
    names bound here."""
    return all(_function(name) is not None for name in names)


def _call(name: str, *args: Any) -> Any:
    function = _function(name)
    if function is None:
        raise RuntimeError(f"this llama.cpp build does not export {name}")
    return function(*args)


def set_embeddings_nextn(ctx: Any, value: bool, *, masked: bool) -> None:
    """Make `ctx` output nextn embeddings: for every row of a batch, or (masked) only for
    the rows that ask for logits."""
    _call("llama_set_embeddings_nextn", ctx, value, masked)


def nextn_rows(ctx: Any, rows: int, n_embd: int) -> Any:
    """The first `rows` nextn embeddings of the last batch, copied out (rows × n_embd)."""
    import numpy as np

    pointer = _call("llama_get_embeddings_nextn", ctx)
    if not pointer:
        raise RuntimeError("the context has no nextn embeddings (were they asked for?)")
    return np.ctypeslib.as_array(pointer, shape=(rows, n_embd)).copy()


def nextn_row(ctx: Any, index: int, n_embd: int) -> Any:
    """The nextn embedding of output row `index` of the last batch, copied out."""
    import numpy as np

    pointer = _call("llama_get_embeddings_nextn_ith", ctx, index)
    if not pointer:
        raise RuntimeError(f"no nextn embedding for row {index}")
    return np.ctypeslib.as_array(pointer, shape=(n_embd,)).copy()


def set_nextn_layer_offset(ctx: Any, offset: int) -> None:
    _call("llama_set_nextn_layer_offset", ctx, offset)


def ctx_other(ctx: Any) -> int | None:
    """The context whose memory `ctx` shares (a Gemma 4 assistant's target), or None."""
    other = _call("llama_get_ctx_other", ctx)
    return int(other) if other else None


def set_embeddings_layer_inp(ctx: Any, layer: int, value: bool) -> None:
    """Make `ctx` keep the input of `layer` (the hidden state after layer − 1) for every row
    of a batch."""
    _call("llama_set_embeddings_layer_inp", ctx, layer, value)


def layer_inp_rows(ctx: Any, layer: int, rows: int, n_embd: int) -> Any:
    """The input of `layer` for the first `rows` rows of the last batch, copied out."""
    import numpy as np

    pointer = _call("llama_get_embeddings_layer_inp", ctx, layer)
    if not pointer:
        raise RuntimeError(f"the context kept no input of layer {layer} (was it asked for?)")
    return np.ctypeslib.as_array(pointer, shape=(rows, n_embd)).copy()


def target_layer_ids(model: Any) -> list[int]:
    """The target layers whose inputs a draft file (EAGLE-3, DFlash) reads, in its order."""
    count = int(_call("llama_model_target_layer_ids_n", model))
    if count == 0:
        return []
    pointer = _call("llama_model_target_layer_ids", model)
    return [int(pointer[i]) for i in range(count)]


def dflash_selector_top_k(model: Any) -> int:
    """A DFlash2 draft's selector width (0 for a plain DFlash draft)."""
    return int(_call("llama_model_dflash_selector_top_k", model))


__all__ = [
    "LAYER_INPUTS",
    "NEXTN",
    "available",
    "ctx_other",
    "dflash_selector_top_k",
    "layer_inp_rows",
    "nextn_row",
    "nextn_rows",
    "set_embeddings_layer_inp",
    "set_embeddings_nextn",
    "set_nextn_layer_offset",
    "target_layer_ids",
]
