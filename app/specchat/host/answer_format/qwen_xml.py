"""Qwen3-Coder's and Qwen3.5's XML tool calls read as llama.cpp reads them (its
common/parsers/qwen3-coder.cpp): `<function=name>` and one `<parameter=key>` block a value."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from specchat.host.answer_format.json_calls import ParsedCall, Schemas

#: JSON schema's value types.
JSON_TYPES = frozenset({"string", "number", "integer", "boolean", "null", "array", "object"})

_FUNCTION = re.compile(r"\s*<function=([^>\n]+)>\n?")
_PARAMETER = re.compile(r"\s*<parameter=([^>\n]+)>\n?")
_FUNCTION_END = re.compile(r"\s*</function>\s*")
#: A value's closing tag (the format writes a line break before it, which is no part of
#: the value).
_VALUE_END = "</parameter>"


def read_calls(body: str, schemas: Mapping[str, Mapping[str, Any]]) -> list[ParsedCall] | None:
    """The call in one `<tool_call>` block's text; None where it is no call (its text is
    then the answer's, as written); [] where a value its schema wants as JSON (no string
    allowed) is no JSON: llama.cpp's parser then fails, and its lenient reading of the
    answer is empty."""
    function = _FUNCTION.match(body)
    if function is None:
        return None
    name = function.group(1).strip()
    properties = _properties(schemas.get(name))
    members: list[str] = []
    at = function.end()
    while True:
        parameter = _PARAMETER.match(body, at)
        if parameter is None:
            break
        end = body.find(_VALUE_END, parameter.end())
        if end < 0:  # cut short: the value as far as it was written
            end = len(body)
        value = body[parameter.end() : end]
        key = parameter.group(1).strip()
        if _malformed(value, properties.get(key)):
            return []
        members.append(
            json.dumps(key, ensure_ascii=False) + ":" + value_json(value, properties.get(key))
        )
        at = min(len(body), end + len(_VALUE_END))
    rest = body[at:]
    closing = _FUNCTION_END.match(rest)
    if (closing is None or closing.end() != len(rest)) and rest.strip():
        return None  # text after the parameters that is no closing: no call llama.cpp reads
    return [ParsedCall(name, "{" + ",".join(members) + "}")]


def value_json(written: str, schema: Mapping[str, Any] | None, *, own_line: bool = True) -> str:
    """A parameter's value as JSON text. Its line breaks around it belong to the format (the
    value `#include\\n` is written `#include\\n\\n</parameter>`); a value the schema types as
    a string is a string, one it types otherwise is its JSON where it reads as such, and a
    value of a parameter the schema does not know is JSON where it parses, else a string.
    `own_line`: the format writes the value on lines of its own (Qwen's; GLM's and
    MiniMax's are between tags on one line)."""
    value = written.removesuffix("\n") if own_line else written
    types = value_types(schema)
    if types != {"string"} and reads_as(value, types):
        return value
    return json.dumps(value, ensure_ascii=False)


def wants_json(parameters: Mapping[str, Any] | None) -> bool:
    """Whether a function of these parameters has one whose value must be JSON (its schema
    allows no string): a call to it may be malformed, known only once its value is whole."""
    properties = _properties(parameters)
    return any("string" not in value_types(schema) for schema in properties.values())


def _malformed(written: str, schema: Mapping[str, Any] | None) -> bool:
    if schema is None or "string" in value_types(schema):
        return False
    try:
        json.loads(written)
    except ValueError:
        return True
    return False


def reads_as(value: str, types: frozenset[str]) -> bool:
    """Whether `value` is JSON of one of `types` (an integer is a number too)."""
    try:
        parsed = json.loads(value)
    except ValueError:
        return False
    kind = _type_of(parsed)
    return kind in types or (kind == "integer" and "number" in types)


def value_types(schema: Mapping[str, Any] | None) -> frozenset[str]:
    """The JSON types a parameter's schema allows (its `type`, or its `anyOf`/`oneOf`
    alternatives'; an enum of strings is a string); every type where it says none."""
    if not isinstance(schema, Mapping):
        return JSON_TYPES
    kind = schema.get("type")
    if isinstance(kind, str):
        return frozenset({kind}) & JSON_TYPES or JSON_TYPES
    if isinstance(kind, list):
        return frozenset(k for k in kind if isinstance(k, str)) & JSON_TYPES or JSON_TYPES
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            return frozenset().union(*(value_types(o) for o in options))
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and all(isinstance(v, str) for v in enum):
        return frozenset({"string"})
    return JSON_TYPES


def _type_of(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _properties(parameters: Mapping[str, Any] | None) -> Mapping[str, Any]:
    properties = (parameters or {}).get("properties")
    return properties if isinstance(properties, Mapping) else {}


def head(body: str) -> tuple[str, int] | None:
    """A call's function name and where its parameters start, once `<function=name>` is
    written whole."""
    function = _FUNCTION.match(body)
    if function is None or not function.group(0).endswith((">", ">\n")):
        return None
    return function.group(1).strip(), function.end()


def arguments_so_far(
    body: str, start: int, schemas: Schemas, name: str, *, final: bool, closing: str = ""
) -> str:
    """A call's arguments as JSON text, as far as its text says them: each later text's is
    this one continued (a string value streamed as it comes, another value once whole;
    nothing of what may be the format's own line break or closing tag). `final`: the call's
    text ended (its closing, or the answer's end): what is open is closed, and text that
    is no parameter is left out. `closing`: the text that closes the call, held back too
    while its start may be what the text ends with."""
    properties = _properties(schemas.get(name))
    members: list[str] = []
    at = start
    while True:
        parameter = _PARAMETER.match(body, at)
        if parameter is None or (not final and parameter.end() == len(body)):
            # No (whole) parameter here; where it is only the start of one, wait for it.
            break
        key = parameter.group(1).strip()
        named = json.dumps(key, ensure_ascii=False) + ":"
        schema = properties.get(key)
        end = body.find(_VALUE_END, parameter.end())
        if end >= 0 or final:
            value = body[parameter.end() : end if end >= 0 else len(body)]
            members.append(named + value_json(value, schema))
            if end < 0:
                break
            at = end + len(_VALUE_END)
            continue
        value = body[parameter.end() :]
        if value_types(schema) == {"string"}:
            # What may yet be the format's line break and closing tag is held back.
            shown = value[: len(value) - _closing_start(value, closing)]
            members.append(named + json.dumps(shown, ensure_ascii=False)[:-1])
        else:
            members.append(named)
        return "{" + ",".join(members)
    return "{" + ",".join(members) + ("}" if final else "")


def _closing_start(value: str, call_closing: str) -> int:
    """How much of the value's end may be the start of its closing tag (and the line break
    before it, which is the format's), or of the call's closing."""
    longest = 0
    for closing in ("\n" + _VALUE_END, _VALUE_END, "\n" + call_closing, call_closing):
        for size in range(min(len(closing), len(value)), longest, -1):
            if closing and value.endswith(closing[:size]):
                longest = size
                break
    return longest
