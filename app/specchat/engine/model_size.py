"""A model's size for people: the file's own label, else its parameter count."""

from __future__ import annotations


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
