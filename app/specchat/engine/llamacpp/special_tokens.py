"""A vocabulary's special tokens: those llama.cpp finds in a text by their spelling."""

from __future__ import annotations

from typing import Any

import llama_cpp

from specchat.engine.types import SpecialToken


def spelled_tokens(vocab: Any, n_vocab: int) -> dict[str, SpecialToken]:
    """Every control, unknown and user-defined token of `vocab`, by its spelling."""
    found: dict[str, SpecialToken] = {}
    spelled = (
        llama_cpp.LLAMA_TOKEN_ATTR_CONTROL
        | llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED
        | llama_cpp.LLAMA_TOKEN_ATTR_UNKNOWN
    )
    for token in range(n_vocab):
        attr = int(llama_cpp.llama_vocab_get_attr(vocab, token))
        if not attr & spelled:
            continue
        raw = llama_cpp.llama_vocab_get_text(vocab, token)
        text = raw.decode("utf-8", errors="replace") if raw else ""
        if text:
            found[text] = SpecialToken(
                token,
                control=not attr & llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED,
                lstrip=bool(attr & llama_cpp.LLAMA_TOKEN_ATTR_LSTRIP),
                rstrip=bool(attr & llama_cpp.LLAMA_TOKEN_ATTR_RSTRIP),
            )
    return found
