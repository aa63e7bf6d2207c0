"""Values made text as llama.cpp's Jinja makes them: printed with {{ }}, `|string` and `~`."""

from __future__ import annotations

from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from typing import Any

import jinja2
from jinja2.utils import Namespace

from specchat.engine.templates.guards import current_budget, limit_error

#: Deepest nesting written; deeper (or a list holding itself) is refused, where llama.cpp's
#: Jinja would recurse without end (value_to_string_repr: "TODO: avoid circular references").
_DEPTH = 32

#: llama.cpp's JSON string escapes (value_to_json_internal): these five by name, the other
#: control characters as \u00xx, everything else (non-ASCII included) as it is.
_JSON_ESCAPES = {ord('"'): '\\"', ord("\\"): "\\\\", 8: "\\b", 12: "\\f", 10: "\\n", 13: "\\r"}
_JSON_ESCAPES |= {9: "\\t"} | {
    code: f"\\u{code:04x}" for code in range(0x20) if code not in _JSON_ESCAPES and code != 9
}


class _Writer:
    """Text written piece by piece, refused once past the longest string a rendering builds:
    bounded while it is written, not after."""

    __slots__ = ("length", "limit", "parts")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.length = 0
        self.limit = current_budget().limits.max_chars

    def write(self, text: str) -> None:
        self.length += len(text)
        if self.length > self.limit:
            raise limit_error(
                f"tried to build a string of more than {self.limit:,} characters "
                f"(the limit is {self.limit:,})"
            )
        self.parts.append(text)

    def text(self) -> str:
        return "".join(self.parts)


def _number(value: bool | int | float) -> str:
    """value_bool/int/float::as_string: True/False, digits, and a float as C's %f without
    its trailing zeros, one kept after the point (0.5, 2.0)."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, int):
        return str(value)
    text = f"{value:f}"
    if "." in text:
        text = text.rstrip("0")
        if text.endswith("."):
            text += "0"
    return text


def _items(value: Any) -> Iterator[Any]:
    """A sequence's items; a filter's generator (map, select) is drawn as llama.cpp's array
    would be listed, polling the deadline."""
    budget = current_budget()
    for count, item in enumerate(value, 1):
        if count % 1024 == 0:
            budget.tick()
        yield item


#: What llama.cpp's Jinja holds as an array: lists, and what its filters, range() and a
#: mapping's keys(), values() and items() give (generators, ranges and views in Python).
_SEQUENCES = (list, tuple, Iterator, range, KeysView, ValuesView, ItemsView)


def _is_sequence(value: Any) -> bool:
    return isinstance(value, _SEQUENCES)


def _mapping(value: Any) -> Mapping[Any, Any] | None:
    """A mapping's items, a namespace's included (one of llama.cpp's objects)."""
    if isinstance(value, Namespace):
        attrs: Mapping[Any, Any] = object.__getattribute__(value, "_Namespace__attrs")
        return attrs
    return value if isinstance(value, Mapping) else None


def _write(out: _Writer, value: Any, depth: int) -> None:
    """value_t::as_string of `value` into `out`."""
    if depth > _DEPTH:
        raise limit_error(f"wrote a value nested more than {_DEPTH} deep as text")
    if isinstance(value, str):
        out.write(value)
    elif isinstance(value, (bool, int, float)):
        out.write(_number(value))
    elif value is None:
        out.write("None")
    elif isinstance(value, jinja2.Undefined):
        out.write("")  # Jinja's str() of an undefined value (llama.cpp's throws)
    elif (mapping := _mapping(value)) is not None:
        out.write("{")
        for index, (key, item) in enumerate(mapping.items()):
            out.write(", " if index else "")
            _write_repr(out, key, depth + 1)
            out.write(": ")
            _write_repr(out, item, depth + 1)
        out.write("}")
    elif _is_sequence(value):
        # value_array_t::as_string: a tuple in parentheses, a one-item one with its comma
        is_tuple = isinstance(value, tuple)
        out.write("(" if is_tuple else "[")
        count = 0
        for count, item in enumerate(_items(value), 1):
            out.write(", " if count > 1 else "")
            _write_repr(out, item, depth + 1)
        out.write(("," if count == 1 else "") + ")" if is_tuple else "]")
    else:
        out.write(str(value))  # a function, macro or cycler: a short fixed text


def _write_repr(out: _Writer, value: Any, depth: int) -> None:
    """value_to_string_repr: a string in single quotes as it is, or, when it holds a single
    quote, as llama.cpp's JSON string (Python's repr would escape that quote instead)."""
    if isinstance(value, str):
        if "'" in value:
            out.write('"' + value.translate(_JSON_ESCAPES) + '"')
        else:
            out.write("'" + value + "'")
    elif isinstance(value, jinja2.Undefined):
        out.write("Undefined")
    else:
        _write(out, value, depth)


def as_text(value: Any) -> str:
    """`value|string`, and each side of `~`: value_t::as_string (a mapping or list written
    with its items' value_to_string_repr)."""
    if isinstance(value, str):
        return value
    out = _Writer()
    _write(out, value, 0)
    return out.text()


def _write_printed(out: _Writer, value: Any, depth: int) -> None:
    if depth > _DEPTH:
        raise limit_error(f"printed a value nested more than {_DEPTH} deep")
    if isinstance(value, str):
        out.write(value)
    elif isinstance(value, (bool, int, float)):
        out.write(_number(value))
    elif _is_sequence(value):
        for item in _items(value):
            _write_printed(out, item, depth + 1)


def printed(value: Any) -> str:
    """What `{{ value }}` writes (gather_string_parts_recursive): text as it is, a number or
    boolean as text, a list's items run together, and nothing for a mapping, none, an
    undefined value or anything else."""
    if isinstance(value, str):
        return value
    out = _Writer()
    _write_printed(out, value, 0)
    return out.text()


def concat(parts: tuple[Any, ...]) -> str:
    """`a ~ b ~ …`: each side as text, none and undefined as nothing (llama.cpp's
    workaround_concat_null_with_str)."""
    return "".join(
        "" if part is None or isinstance(part, jinja2.Undefined) else as_text(part)
        for part in parts
    )
