"""LFM2's and LFM2.5's almost-Python calls read as llama.cpp reads them (common/parsers/
lfm2.cpp): `[name(key='text', n=3, filters={"a": [1]}), ...]`, strings in either quote,
other values JSON (true/false/null, or Python's True/False/None)."""

from __future__ import annotations

import json
import re

from specchat.host.answer_format.json_calls import ParsedCall, Schemas

_NAME = re.compile(r"\s*([A-Za-z_][\w.\-]*)\s*\(")
_KEY = re.compile(r"\s*([A-Za-z_]\w*)\s*=\s*")
_PYTHON_WORDS = {"True": "true", "False": "false", "None": "null"}
_DECODER = json.JSONDecoder()


class _Unreadable(ValueError):
    """The text is no call list in this syntax."""


def read_calls(body: str, schemas: Schemas) -> list[ParsedCall] | None:
    """The calls in `[...]` (the tags left out); None where it is none."""
    del schemas
    text = body.strip()
    if not (text.startswith("[") and text.endswith("]")):
        return None
    try:
        return _calls(text[1:-1])
    except _Unreadable:
        return None


def _calls(text: str) -> list[ParsedCall]:
    calls = []
    at = 0
    while True:
        name = _NAME.match(text, at)
        if name is None:
            raise _Unreadable
        members, at = _arguments(text, name.end())
        calls.append(ParsedCall(name.group(1), "{" + ",".join(members) + "}"))
        at = _space(text, at)
        if at == len(text):
            return calls
        if text[at] != ",":
            raise _Unreadable
        at += 1


def _arguments(text: str, at: int) -> tuple[list[str], int]:
    members: list[str] = []
    at = _space(text, at)
    if text.startswith(")", at):
        return members, at + 1
    while True:
        key = _KEY.match(text, at)
        if key is None:
            raise _Unreadable
        value, at = _value(text, key.end())
        members.append(json.dumps(key.group(1)) + ":" + value)
        at = _space(text, at)
        if text.startswith(")", at):
            return members, at + 1
        if not text.startswith(",", at):
            raise _Unreadable
        at += 1


def _value(text: str, at: int) -> tuple[str, int]:
    """A value as JSON text: a quoted string as a JSON string, a JSON value as written."""
    if text.startswith("'", at):
        end = at + 1
        chars: list[str] = []
        while end < len(text) and text[end] != "'":
            if text[end] == "\\" and end + 1 < len(text):
                end += 1
            chars.append(text[end])
            end += 1
        if end >= len(text):
            raise _Unreadable
        return json.dumps("".join(chars), ensure_ascii=False), end + 1
    for word, json_word in _PYTHON_WORDS.items():
        if text.startswith(word, at):
            return json_word, at + len(word)
    try:
        _, end = _DECODER.raw_decode(text, at)
    except ValueError:
        raise _Unreadable from None
    return text[at:end], end


def _space(text: str, at: int) -> int:
    while at < len(text) and text[at].isspace():
        at += 1
    return at
