"""Tool calls written between a family's own tags, read as llama.cpp reads them: DeepSeek
V3.1 and R1, GLM 4.5 to 4.7, Kimi K2, MiniMax M2 (each a call block's text, opening and
closing left out, read as calls; None where it is no call)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from specchat.host.answer_format.json_calls import ParsedCall, Schemas, value_end
from specchat.host.answer_format.qwen_xml import reads_as, value_json, value_types

#: DeepSeek's markers (full-width bars and the lower-block character, as its tokens spell them).
DEEPSEEK_CALL = "<｜tool▁call▁begin｜>"
DEEPSEEK_CALL_END = "<｜tool▁call▁end｜>"
DEEPSEEK_SEP = "<｜tool▁sep｜>"
KIMI_CALL = "<|tool_call_begin|>"
KIMI_ARGUMENTS = "<|tool_call_argument_begin|>"
KIMI_CALL_END = "<|tool_call_end|>"

_FENCED_JSON = re.compile(r"\s*```(?:json)?\s*\n(.*?)\n?```\s*$", re.DOTALL)
_GLM_ARGUMENT = re.compile(r"\s*<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.DOTALL)
_MINIMAX_INVOKE = re.compile(r'\s*<invoke name="([^"]+)">(.*?)</invoke>', re.DOTALL)
_MINIMAX_PARAMETER = re.compile(r'\s*<parameter name="([^"]+)">(.*?)</parameter>', re.DOTALL)
_DSML_INVOKE = re.compile(r'\s*<｜DSML｜invoke name="([^"]+)">(.*?)</｜DSML｜invoke>', re.DOTALL)
_DSML_PARAMETER = re.compile(
    r'\s*<｜DSML｜parameter name="([^"]+)" string="(true|false)">(.*?)</｜DSML｜parameter>',
    re.DOTALL,
)
_KIMI_ID = re.compile(r"\s*(?:functions\.)?([^:<\s]+)(?::\d+)?\s*$")


def _json_arguments(text: str) -> str | None:
    """A JSON object's text as written, where the text is one (white space around it left)."""
    start = len(text) - len(text.lstrip())
    end = value_end(text, start)
    if end is None or text[end:].strip() or not text[start:].startswith("{"):
        return None
    return text[start:end]


def _split_calls(body: str, begin: str, end: str) -> list[str] | None:
    """The calls' texts between `begin` and `end` markers, only white space between them."""
    parts: list[str] = []
    rest = body.strip()
    while rest:
        if not rest.startswith(begin):
            return None
        close = rest.find(end)
        if close < 0:  # cut short: as far as it was written
            parts.append(rest[len(begin) :])
            break
        parts.append(rest[len(begin) : close])
        rest = rest[close + len(end) :].strip()
    return parts or None


def read_deepseek(body: str, schemas: Schemas) -> list[ParsedCall] | None:
    """`<｜tool▁call▁begin｜>name<｜tool▁sep｜>{json}<｜tool▁call▁end｜>` repeated (V3.1), or
    R1's `function<｜tool▁sep｜>name` with its arguments in a fenced JSON block."""
    del schemas
    parts = _split_calls(body, DEEPSEEK_CALL, DEEPSEEK_CALL_END)
    if parts is None:
        return None
    calls = []
    for part in parts:
        kind, sep, rest = part.partition(DEEPSEEK_SEP)
        if not sep:
            return None
        if kind.strip() == "function":  # R1: the name on its own line, then the fence
            name, _, fenced = rest.partition("\n")
            block = _FENCED_JSON.match(fenced)
            arguments = None if block is None else _json_arguments(block.group(1))
        else:
            name, arguments = kind, _json_arguments(rest)
        if arguments is None or not name.strip():
            return None
        calls.append(ParsedCall(name.strip(), arguments))
    return calls


def read_kimi(body: str, schemas: Schemas) -> list[ParsedCall] | None:
    """`<|tool_call_begin|>functions.name:0<|tool_call_argument_begin|>{json}<|tool_call_end|>`
    repeated inside the section's markers."""
    del schemas
    parts = _split_calls(body, KIMI_CALL, KIMI_CALL_END)
    if parts is None:
        return None
    calls = []
    for part in parts:
        ident, marker, rest = part.partition(KIMI_ARGUMENTS)
        name = _KIMI_ID.match(ident)
        arguments = _json_arguments(rest)
        if not marker or name is None or arguments is None:
            return None
        calls.append(ParsedCall(name.group(1), arguments))
    return calls


def _members(pairs: list[tuple[str, str]], properties: Mapping[str, Any]) -> str | None:
    """The arguments' JSON text; None where a value the schema types as no string is no
    JSON (llama.cpp then keeps the call's text as content)."""
    members = []
    for key, written in pairs:
        schema = properties.get(key.strip())
        types = value_types(schema)
        if "string" not in types and not reads_as(written, types):
            return None
        value = value_json(written, schema, own_line=False)
        members.append(json.dumps(key.strip(), ensure_ascii=False) + ":" + value)
    return "{" + ",".join(members) + "}"


def _properties(schemas: Schemas, name: str) -> Mapping[str, Any]:
    properties = (schemas.get(name) or {}).get("properties")
    return properties if isinstance(properties, Mapping) else {}


def read_glm(body: str, schemas: Schemas) -> list[ParsedCall] | None:
    """`name` then `<arg_key>k</arg_key><arg_value>v</arg_value>` pairs, values typed by the
    function's schema as Qwen's XML values are."""
    head, marker, _ = body.partition("<arg_key>")
    name = head.strip()
    if not name or "<" in name or "\n" in name:
        return None
    pairs: list[tuple[str, str]] = []
    at = len(head)
    while marker:
        found = _GLM_ARGUMENT.match(body, at)
        if found is None:
            return None
        pairs.append((found.group(1), found.group(2)))
        at = found.end()
        marker = "<arg_key>" if body.startswith("<arg_key>", at + _space(body[at:])) else ""
    if body[at:].strip():
        return None
    arguments = _members(pairs, _properties(schemas, name))
    return None if arguments is None else [ParsedCall(name, arguments)]


def read_minimax(body: str, schemas: Schemas) -> list[ParsedCall] | None:
    """`<invoke name="f"><parameter name="k">v</parameter>...</invoke>` repeated."""
    calls = []
    at = 0
    while at < len(body) and body[at:].strip():
        invoke = _MINIMAX_INVOKE.match(body, at)
        if invoke is None:
            return None
        name, inner = invoke.group(1), invoke.group(2)
        pairs = []
        inside = 0
        while inner[inside:].strip():
            parameter = _MINIMAX_PARAMETER.match(inner, inside)
            if parameter is None:
                return None
            pairs.append((parameter.group(1), parameter.group(2)))
            inside = parameter.end()
        arguments = _members(pairs, _properties(schemas, name))
        if arguments is None:
            return None
        calls.append(ParsedCall(name, arguments))
        at = invoke.end()
    return calls or None


def read_dsml(body: str, schemas: Schemas) -> list[ParsedCall] | None:
    """DeepSeek V3.2 and V4: `<｜DSML｜invoke name="f">` with `<｜DSML｜parameter name="k"
    string="true|false">v</｜DSML｜parameter>`, a string as written, another value its JSON."""
    del schemas
    calls = []
    at = 0
    while body[at:].strip():
        invoke = _DSML_INVOKE.match(body, at)
        if invoke is None:
            return None
        members = []
        inside, inner = 0, invoke.group(2)
        while inner[inside:].strip():
            parameter = _DSML_PARAMETER.match(inner, inside)
            if parameter is None:
                return None
            key, is_string, value = parameter.groups()
            text = value if is_string == "false" and _json_arguments_any(value) else None
            written = json.dumps(value, ensure_ascii=False) if text is None else text
            members.append(json.dumps(key, ensure_ascii=False) + ":" + written)
            inside = parameter.end()
        calls.append(ParsedCall(invoke.group(1), "{" + ",".join(members) + "}"))
        at = invoke.end()
    return calls or None


def _json_arguments_any(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _space(text: str) -> int:
    return len(text) - len(text.lstrip())
