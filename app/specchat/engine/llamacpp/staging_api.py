"""libllama's staging API (llama.cpp's src/llama-ext.h): what a draft head reads of its target.

MTP heads and Gemma 4 assistants draft from the target's last hidden state ("nextn"
embeddings). llama.cpp declares the functions that expose it in a C++ header outside its C
API, so llama-cpp-python binds none of them, but libllama exports them: with C++ linkage,
under their Itanium-mangled names (the ABI of GCC and Clang on Linux and macOS). They are
bound here by those names; a library built another way (MSVC) has other names, and then
`available()` is False and the drafters that need them are not offered.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

import llama_cpp.llama_cpp as low_level

_ctx = ctypes.c_void_p
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
}


@functools.cache
def _functions() -> dict[str, Any] | None:
    library = low_level._lib
    found: dict[str, Any] = {}
    for name, (mangled, argtypes, restype) in _SIGNATURES.items():
        try:
            function = getattr(library, mangled)
        except AttributeError:
            return None
        function.argtypes = argtypes
        function.restype = restype
        found[name] = function
    return found


def available() -> bool:
    """Whether this libllama exports the nextn functions under the names bound here."""
    return _functions() is not None


def _call(name: str, *args: Any) -> Any:
    functions = _functions()
    if functions is None:
        raise RuntimeError(f"this llama.cpp build does not export {name}")
    return functions[name](*args)


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


__all__ = [
    "available",
    "ctx_other",
    "nextn_row",
    "nextn_rows",
    "set_embeddings_nextn",
    "set_nextn_layer_offset",
]
