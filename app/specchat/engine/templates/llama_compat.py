"""What llama.cpp's chat code gives a template beyond the chat: its variables, its tool shape."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import jinja2

#: Longest format strftime_now takes: real templates ask for a date ("%d %b %Y"); a long
#: format is expanded by the C library before any hook could see its size.
STRFTIME_CHARS = 256


class StrftimeError(ValueError):
    """A strftime_now format refused (not text, or too long); the message is for people."""


def strftime(moment: datetime, fmt: object) -> str:
    """`moment` in `fmt`, the format bounded."""
    if not isinstance(fmt, str):
        raise StrftimeError("asked for a date in a format that is not text")
    if len(fmt) > STRFTIME_CHARS:
        raise StrftimeError(
            f"asked for a date in a {len(fmt):,}-character format (at most {STRFTIME_CHARS})"
        )
    return moment.strftime(fmt)


def implicit_context(
    now: datetime, *, strftime_now: Callable[[datetime], Callable[[str], str]]
) -> dict[str, Any]:
    """What llama.cpp gives every template besides the chat (common_chat_templates_apply):
    thinking on unless asked otherwise, today's date in two spellings (Llama 3.1 writes
    `date_string`), and `strftime_now` reading the same clock (`strftime_now(now)` makes
    it). A request's own variables replace any of them."""
    return {
        "enable_thinking": True,
        "datetime": now.strftime("%b %d %Y"),
        "date_string": now.strftime("%d %b %Y"),
        "strftime_now": strftime_now(now),
    }


def tool_for_template(tool: Mapping[str, Any]) -> dict[str, Any]:
    """A function definition as llama.cpp hands it to templates: OpenAI's shape rebuilt as
    type, then the function's name, description ("" when absent) and parameters, nothing
    else (common_chat_tools_to_json_oaicompat). A template that writes a tool whole writes
    these keys in this order; one that is not a function is passed as it came."""
    function = tool.get("function")
    if tool.get("type") != "function" or not isinstance(function, Mapping):
        return dict(tool)
    parameters = function.get("parameters")
    return {
        "type": "function",
        "function": {
            "name": function.get("name", ""),
            "description": function.get("description") or "",
            "parameters": dict(parameters) if isinstance(parameters, Mapping) else {},
        },
    }


class LenientUndefined(jinja2.ChainableUndefined):
    """An undefined value as llama.cpp's Jinja takes it: its attributes undefined too, and
    added to text as nothing. Command R+ writes `'): ' + param.description` for a
    parameter without one and reads `spec.additionalProperties.type` for an object without
    them, firefunction-v2 `suffix + "\\n" + functions`; Jinja alone refuses all three.
    Anything else done with it fails as before."""

    __slots__ = ()

    def __add__(self, other: object) -> Any:
        if isinstance(other, str):
            return other
        return super().__add__(other)

    def __radd__(self, other: object) -> Any:
        if isinstance(other, str):
            return other
        return super().__radd__(other)
