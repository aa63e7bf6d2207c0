"""A request's function calling checked: `tools`, `tool_choice`, and the tool calls and tool
results its messages carry."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from specchat.engine.templates.chat_template import ToolCall
from specchat.host.chat_call import ToolRequest
from specchat.host.errors import ApiError, invalid

#: OpenAI's rule for a function's name.
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: Most functions one request may offer.
MAX_TOOLS = 128


def _type_error(param: str, expected: str) -> ApiError:
    return invalid(f"'{param}' must be {expected}", param=param, code="invalid_type")


def _name(value: object, param: str) -> str:
    if not isinstance(value, str):
        raise _type_error(param, "a string")
    if not _NAME.fullmatch(value):
        raise invalid(
            f"'{param}' must be 1 to 64 letters, digits, underscores or dashes (got {value!r})",
            param=param,
        )
    return value


def _tool(value: object, param: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _type_error(param, "an object")
    if value.get("type") != "function":
        raise invalid(
            f"'{param}.type' must be 'function' (got {value.get('type')!r})",
            param=f"{param}.type",
            code="unsupported_value",
        )
    function = value.get("function")
    if not isinstance(function, Mapping):
        raise _type_error(f"{param}.function", "an object")
    _name(function.get("name"), f"{param}.function.name")
    description = function.get("description")
    if description is not None and not isinstance(description, str):
        raise _type_error(f"{param}.function.description", "a string")
    parameters = function.get("parameters")
    if parameters is not None and not isinstance(parameters, Mapping):
        raise _type_error(f"{param}.function.parameters", "an object (a JSON schema)")
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:  # a JSON string's unpaired \ud800
        raise invalid(
            f"'{param}' holds text that is not valid (an unpaired surrogate)", param=param
        ) from None
    return value


def _function_named(value: object, param: str, names: list[str]) -> str:
    """The name in `{"type": "function", "function": {"name": ...}}`, one of `names`."""
    function = None
    if isinstance(value, Mapping) and value.get("type") == "function":
        function = value.get("function")
    if not isinstance(function, Mapping):
        raise invalid(
            f"""'{param}' must be {{"type": "function", "function": {{"name": ...}}}}""",
            param=param,
        )
    name = _name(function.get("name"), f"{param}.function.name")
    if name not in names:
        raise invalid(
            f"'{param}' names {name!r}, which 'tools' does not offer",
            param=f"{param}.function.name",
        )
    return name


def _allowed(value: Mapping[str, Any], names: list[str]) -> tuple[str, str, tuple[str, ...]]:
    """OpenAI's `allowed_tools` choice: the functions the answer may call, out of all those
    sent (pydantic-ai sends it for an agent whose `tool_choice` names some of its tools)."""
    allowed = value.get("allowed_tools")
    if not isinstance(allowed, Mapping):
        raise _type_error("tool_choice.allowed_tools", "an object")
    mode = allowed.get("mode")
    if mode not in ("auto", "required"):
        raise invalid(
            f"'tool_choice.allowed_tools.mode' must be auto or required (got {mode!r})",
            param="tool_choice.allowed_tools.mode",
        )
    tools = allowed.get("tools")
    if not isinstance(tools, list) or not tools:
        raise _type_error("tool_choice.allowed_tools.tools", "a list of functions")
    chosen = tuple(
        _function_named(item, f"tool_choice.allowed_tools.tools[{index}]", names)
        for index, item in enumerate(tools)
    )
    if mode == "required" and len(set(chosen)) == 1:  # a call of that one function
        return "function", chosen[0], chosen
    return mode, "", chosen


def _choice(value: object, names: list[str]) -> tuple[str, str, tuple[str, ...] | None]:
    """`tool_choice` as (choice, function, the functions allowed or None for all)."""
    if value is None:
        return ("auto" if names else "none"), "", None
    if isinstance(value, str):
        if value not in ("none", "auto", "required"):
            raise invalid(
                f"'tool_choice' must be none, auto, required or a function (got {value!r})",
                param="tool_choice",
            )
        if value == "required" and not names:
            raise invalid("'tool_choice' required needs 'tools'", param="tool_choice")
        return value, "", None
    if not isinstance(value, Mapping):
        raise _type_error("tool_choice", "a string, an object naming a function or allowed_tools")
    if value.get("type") == "allowed_tools":
        return _allowed(value, names)
    return "function", _function_named(value, "tool_choice", names), None


def parse_tools(body: Mapping[str, Any]) -> ToolRequest | None:
    """The request's functions and tool choice; None where the answer is plain text (no
    tools, or `tool_choice` none: the prompt is then written without them)."""
    value = body.get("tools")
    tools: list[Mapping[str, Any]] = []
    if value is not None:
        if not isinstance(value, list):
            raise _type_error("tools", "a list of functions")
        if len(value) > MAX_TOOLS:
            raise invalid(f"'tools' holds at most {MAX_TOOLS} functions", param="tools")
        tools = [_tool(item, f"tools[{index}]") for index, item in enumerate(value)]
    names = [str(tool["function"]["name"]) for tool in tools]
    parallel = body.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        raise _type_error("parallel_tool_calls", "a boolean")
    choice, function, allowed = _choice(body.get("tool_choice"), names)
    if choice == "none" or not tools:
        return None
    if allowed is not None:  # the others are not written: the model cannot call them
        tools = [tool for tool in tools if tool["function"]["name"] in allowed]
    return ToolRequest(tuple(tools), choice, function, parallel is not False)


def parse_tool_calls(value: object, where: str) -> tuple[ToolCall, ...]:
    """An assistant message's `tool_calls`."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise _type_error(f"{where}.tool_calls", "a list")
    calls = []
    for index, item in enumerate(value):
        param = f"{where}.tool_calls[{index}]"
        if not isinstance(item, Mapping):
            raise _type_error(param, "an object")
        ident = item.get("id", "")
        if not isinstance(ident, str):
            raise _type_error(f"{param}.id", "a string")
        function = item.get("function")
        if not isinstance(function, Mapping):
            raise _type_error(f"{param}.function", "an object")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise _type_error(f"{param}.function.name", "a non-empty string")
        arguments = function.get("arguments", "")
        if isinstance(arguments, Mapping):  # sent as an object by some clients
            arguments = json.dumps(arguments, ensure_ascii=False)
        if not isinstance(arguments, str):
            raise _type_error(f"{param}.function.arguments", "a string of JSON")
        calls.append(ToolCall(ident, name, arguments))
    return tuple(calls)


def optional_string(item: Mapping[str, Any], key: str, where: str) -> str:
    """A message's string field that may be left out (a tool result's `tool_call_id`)."""
    value = item.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _type_error(f"{where}.{key}", "a string")
    return value
