"""Gemma 4's tool calls read as llama.cpp reads them (common/parsers/gemma4.cpp and its
`gemma4_to_json`): `call:name{key:value,...}`, strings between `<|"|>` marks, other values
bare, nested objects in braces."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from specchat.host.answer_format.json_calls import ParsedCall

#: A string's mark, before and after it.
QUOTE = '<|"|>'
_NAME = re.compile(r"call:([^{\s]+)(?=\{)")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_WORDS = ("true", "false", "null")


class _Unreadable(ValueError):
    """The call's text is not Gemma 4's value syntax."""


def read_calls(body: str, schemas: Mapping[str, Mapping[str, Any]]) -> list[ParsedCall] | None:
    """The call in one `<|tool_call>` block's text; [] where it is not Gemma 4's syntax:
    llama.cpp's parser then fails, and its lenient reading keeps only the text before it."""
    del schemas  # Gemma 4 types its values itself
    name = _NAME.match(body)
    if name is None:
        return []
    try:
        arguments, end = _value(body, name.end())
    except _Unreadable:
        return []
    if body[end:].strip() or not arguments.startswith("{"):
        return []
    return [ParsedCall(name.group(1), arguments)]


def _space(text: str, at: int) -> int:
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def _value(text: str, at: int) -> tuple[str, int]:
    """One value at `at` as JSON text, and where it ends."""
    if text.startswith(QUOTE, at):
        end = text.find(QUOTE, at + len(QUOTE))
        if end < 0:
            raise _Unreadable
        inner = text[at + len(QUOTE) : end]
        return json.dumps(inner, ensure_ascii=False), end + len(QUOTE)
    if text.startswith("{", at):
        return _members(text, at + 1, "}", keyed=True)
    if text.startswith("[", at):
        return _members(text, at + 1, "]", keyed=False)
    for word in _WORDS:
        if text.startswith(word, at):
            return word, at + len(word)
    number = _NUMBER.match(text, at)
    if number is None:
        raise _Unreadable
    return number.group(0), number.end()


def _members(text: str, at: int, close: str, *, keyed: bool) -> tuple[str, int]:
    """An object's or a list's members up to `close`, written as JSON without spaces (as
    llama.cpp writes them)."""
    parts: list[str] = []
    at = _space(text, at)
    if text.startswith(close, at):
        return ("{}" if keyed else "[]"), at + 1
    while True:
        key = ""
        if keyed:
            colon = text.find(":", at)
            brace = text.find("}", at)
            if colon < 0 or (0 <= brace < colon) or colon == at:
                raise _Unreadable
            key = json.dumps(text[at:colon], ensure_ascii=False) + ":"
            at = _space(text, colon + 1)
        value, at = _value(text, at)
        parts.append(key + value)
        if text.startswith(",", at):
            at = _space(text, at + 1)
            continue
        at = _space(text, at)
        if text.startswith(close, at):
            body = ",".join(parts)
            return ("{" + body + "}" if keyed else "[" + body + "]"), at + 1
        raise _Unreadable
