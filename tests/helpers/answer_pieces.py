"""An answer's streamed pieces put together as a client does, and a text cut into pieces."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from specchat.host.answer_format.reader import Piece, Reasoning
from specchat.host.answer_format.splitter import Arguments, CallOpened, Content


def gathered(pieces: Sequence[Piece]) -> tuple[str, str, list[tuple[str, str, str]]]:
    """The reasoning, the content, and each call's (id, name, arguments)."""
    reasoning = "".join(p.text for p in pieces if isinstance(p, Reasoning))
    content = "".join(p.text for p in pieces if isinstance(p, Content))
    calls: dict[int, tuple[str, str, str]] = {}
    for piece in pieces:
        if isinstance(piece, CallOpened):
            assert piece.index not in calls, "a call opens once"
            calls[piece.index] = (piece.id, piece.name, "")
        elif isinstance(piece, Arguments):
            ident, name, arguments = calls[piece.index]  # its name came first
            calls[piece.index] = (ident, name, arguments + piece.text)
    return reasoning, content, [calls[i] for i in sorted(calls)]


def in_pieces(text: str, cuts: Sequence[int]) -> list[str]:
    """`text` cut at `cuts` (taken modulo its length)."""
    edges = [0, *sorted(c % (len(text) + 1) for c in cuts), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(edges)]


def _tool(name: str, properties: dict[str, Any]) -> dict[str, Any]:
    parameters = {"type": "object", "properties": properties}
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


#: llama.cpp's tests/test-chat.cpp's tools (and a few more), in OpenAI's shape.
TOOLS = [
    _tool("special_function", {"arg1": {"type": "integer"}}),
    _tool("special_function_with_opt", {"arg1": {"type": "integer"}, "arg2": {"type": "integer"}}),
    _tool("python", {"code": {"type": "string"}}),
    _tool(
        "edit",
        {
            "filename": {"type": "string"},
            "oldString": {"type": "string"},
            "newString": {"type": "string"},
        },
    ),
    _tool("mixed", {"value": {"type": ["string", "integer"]}, "items": {"type": "array"}}),
    _tool("get_weather", {"location": {"type": "string"}}),
]
