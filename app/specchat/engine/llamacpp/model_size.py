"""A model's size for people: the file's own label, else its parameter count; and what
its context costs in memory."""

from __future__ import annotations

#: Bytes per stored key or value: F16, and Q8_0 (34-byte blocks of 32).
_CACHE_BYTES = {"F16": 2.0, "Q8_0": 34 / 32}


def kv_bytes_per_token(
    *, n_layer: int, n_head: int, n_head_kv: int, n_embd: int, key_type: str = "F16"
) -> int:
    """KV cache bytes per context token: keys (as `key_type`) and F16 values for every
    layer's KV heads; what a larger context costs in memory (0 when the model does not say)."""
    if n_head <= 0:
        return 0
    values = n_layer * n_head_kv * (n_embd // n_head)
    return int(values * (_CACHE_BYTES[key_type] + _CACHE_BYTES["F16"]))


def format_params(n_params: int) -> str:
    """A parameter count as model names write it: 1,543,714,304 -> "1.5B", 494,032,768 -> "494M"."""
    if n_params >= 1e9:
        return f"{n_params / 1e9:.1f}".removesuffix(".0") + "B"
    if n_params >= 1e6:
        return f"{n_params / 1e6:.0f}M"
    return f"{max(1, round(n_params / 1e3))}K"


def sized_description(desc: str, *, size_label: str, n_params: int) -> str:
    """llama.cpp's description with the model's own size in place of its size class.

    llama.cpp names a size class from the layer count ("qwen2 1B" for a 0.5B model, "?B" for
    one it does not know): the file's general.size_label, else the parameter count, is true.
    """
    parts = desc.split(" ", 2)
    if len(parts) < 3:
        return desc
    size = size_label.strip() or (format_params(n_params) if n_params > 0 else parts[1])
    return f"{parts[0]} {size} {parts[2]}"
