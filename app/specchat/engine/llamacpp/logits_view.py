"""A context's logits read in place: arrays over llama.cpp's own buffer, built once."""

from __future__ import annotations

import ctypes
from typing import Any

import llama_cpp
import numpy as np

from specchat.engine.llamacpp.load import DecodeError

#: llama_get_logits answering the address as a plain int: llama_cpp's binding answers a
#: ctypes pointer, which numpy reads through the buffer protocol (tens of µs a token).
_logits_address = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(
    ctypes.cast(llama_cpp.llama_get_logits, ctypes.c_void_p).value or 0
)


class LogitsView:
    """The last pass's logits of one context, as arrays over llama.cpp's buffer.

    The buffer stays put from pass to pass (llama.cpp moves it only to grow it), so the
    array for a number of rows is built once and handed out again: a plain round reads its
    row without building one (numpy's reading of a ctypes pointer cost tens of µs a token).
    What it hands out is llama.cpp's memory: valid until the context's next pass.
    """

    def __init__(self, ctx: Any, n_vocab: int) -> None:
        self._ctx = ctx
        self._n_vocab = n_vocab
        self._views: dict[tuple[int, int], np.ndarray] = {}

    def rows(self, n: int) -> np.ndarray:
        """The last pass's first `n` rows of logits, shape (n, n_vocab), not a copy."""
        address = _logits_address(self._ctx)
        if not address:
            raise DecodeError("llama.cpp holds no logits")
        key = (address, n)
        view = self._views.get(key)
        if view is None:
            if all(a != address for a, _ in self._views):
                self._views.clear()  # the buffer moved: arrays over the old one are stale
            floats = (ctypes.c_float * (n * self._n_vocab)).from_address(address)
            view = self._views[key] = np.ctypeslib.as_array(floats).reshape(n, self._n_vocab)
        return view
