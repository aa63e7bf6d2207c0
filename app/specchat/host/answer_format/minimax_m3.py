"""MiniMax M3's tool calls read as llama.cpp reads them (common/parsers/minimax-m3.cpp):
every tag after the namespace mark `]<]minimax[>[`, `<invoke name="f">` holding one element
a parameter (`<city>Paris</city>`), nested elements an object, `<item>`s a list, each value
typed by the function's schema."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from specchat.host.answer_format.json_calls import ParsedCall, Schemas
from specchat.host.answer_format.qwen_xml import reads_as, value_types

#: The mark before each of the format's tags.
MARK = "]<]minimax[>["
_INVOKE = re.compile(r'<invoke name="([^"]+)">')
_OPEN = re.compile(r"<([\w.\-]+)>")
_CLOSE = re.compile(r"</([\w.\-]+)>")


@dataclass
class _Element:
    tag: str
    text: list[str] = field(default_factory=list)
    children: list[_Element] = field(default_factory=list)


def read_calls(body: str, schemas: Schemas) -> list[ParsedCall] | None:
    """The calls in one tool-call block's text; None where it is none."""
    calls = []
    stack: list[_Element] = []
    name = ""
    for part in body.split(MARK)[1:]:
        if part.startswith("<") and ">" not in part:  # a tag cut short (the block's closing)
            continue
        if (invoke := _INVOKE.match(part)) is not None:
            if stack:
                return None
            name, stack = invoke.group(1), [_Element("invoke")]
            continue
        if (closing := _CLOSE.match(part)) is not None:
            if not stack:
                return None
            element = stack.pop()
            if closing.group(1) != element.tag:
                return None
            if not stack:  # the invoke closed
                schema = schemas.get(name) or {}
                calls.append(ParsedCall(name, _object(element.children, schema)))
            else:
                stack[-1].children.append(element)
            continue
        if (opening := _OPEN.match(part)) is None or not stack:
            if part.strip():
                return None
            continue
        element = _Element(opening.group(1), [part[opening.end() :]])
        stack.append(element)
    return calls if calls and not stack else None


def _object(children: list[_Element], schema: Mapping[str, Any]) -> str:
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    members = [
        json.dumps(child.tag, ensure_ascii=False) + ":" + _value(child, properties.get(child.tag))
        for child in children
    ]
    return "{" + ",".join(members) + "}"


def _value(element: _Element, schema: Any) -> str:
    schema = schema if isinstance(schema, Mapping) else {}
    if element.children:
        if all(child.tag == "item" for child in element.children) and "object" not in value_types(
            schema
        ):
            items = schema.get("items")
            return "[" + ",".join(_value(child, items) for child in element.children) + "]"
        return _object(element.children, schema)
    text = "".join(element.text)
    types = value_types(schema)
    if types != {"string"} and reads_as(text, types):
        return text
    return json.dumps(text, ensure_ascii=False)
