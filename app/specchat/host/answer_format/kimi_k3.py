"""Kimi K3's answers read as llama.cpp reads them (common/parsers/kimi-k3.cpp): sections
`<|open|>name attributes<|sep|>` … `<|close|>name<|sep|>`, the answer starting inside the
`think` section its prompt opened: `think` is the reasoning, `response` the content, each
`call tool="f"` in `tools` a call, its `argument key="k" type="t"` sections its arguments."""

from __future__ import annotations

import json
import re

from specchat.host.answer_format.json_calls import Schemas
from specchat.host.answer_format.messages import Segment

#: The markers, which the engine must spell in the answer's text.
MARKERS = ("<|open|>", "<|close|>", "<|sep|>")
_MARK = re.compile(r"<\|(open|close)\|>([^<]*?)<\|sep\|>")
_ATTRIBUTE = re.compile(r'(\w+)="([^"]*)"')


def segments(text: str, *, final: bool, schemas: Schemas | None = None) -> list[Segment]:
    """The sections of an answer's text as far as it says them: text up to what may start a
    marker, a call once it closes (`final`: an open call closed with what it has)."""
    del schemas  # its calls' arguments are JSON as written
    reasoning: list[str] = []
    content: list[str] = []
    calls: list[Segment] = []
    stack = ["think"]
    call: tuple[str, list[str]] | None = None
    argument: tuple[str, str, list[str]] | None = None
    at = 0
    while True:
        mark = _MARK.search(text, at)
        end = mark.start() if mark else len(text)
        if mark is None and not final:
            end -= _marker_start(text[at:])
        piece = text[at:end]
        if argument is not None:
            argument[2].append(piece)
        elif stack[-1] == "think":
            reasoning.append(piece)
        elif stack[-1] == "response":
            content.append(piece)
        if mark is None:
            break
        kind, header = mark.group(1), mark.group(2).strip()
        name = header.split(" ", 1)[0]
        attributes = dict(_ATTRIBUTE.findall(header))
        if kind == "open":
            stack.append(name)
            if name == "call":
                call = (attributes.get("tool", ""), [])
            elif name == "argument" and call is not None:
                argument = (attributes.get("key", ""), attributes.get("type", "string"), [])
        else:
            if len(stack) > 1:
                stack.pop()
            if name == "argument" and argument is not None and call is not None:
                call[1].append(_member(argument))
                argument = None
            elif name == "call" and call is not None:
                calls.append(Segment("call", "{" + ",".join(call[1]) + "}", call[0]))
                call = None
        at = mark.end()
    if final and call is not None:
        members = call[1] + ([_member(argument)] if argument is not None else [])
        calls.append(Segment("call", "{" + ",".join(members) + "}", call[0]))
    return [Segment("reasoning", "".join(reasoning)), Segment("content", "".join(content)), *calls]


def _member(argument: tuple[str, str, list[str]]) -> str:
    key, kind, pieces = argument
    value = "".join(pieces)
    value = json.dumps(value, ensure_ascii=False) if kind == "string" else _closed(value)
    return json.dumps(key, ensure_ascii=False) + ":" + value


def _closed(value: str) -> str:
    """A JSON value as written, its unclosed braces closed (as llama.cpp closes them)."""
    depth, quoted, escaped = 0, False, False
    for char in value:
        if escaped:
            escaped = False
        elif char == "\\" and quoted:
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif not quoted and char == "{":
            depth += 1
        elif not quoted and char == "}":
            depth -= 1
    return value + "}" * max(depth, 0)


def _marker_start(text: str) -> int:
    """How much of the text's end may be a marker still being written: one opened and not
    yet ended by `<|sep|>`, or the start of one."""
    held = 0
    for marker in MARKERS[:2]:
        at = text.rfind(marker)
        if at >= 0 and "<|sep|>" not in text[at:]:
            held = max(held, len(text) - at)
        for size in range(min(len(marker) - 1, len(text)), 0, -1):
            if text.endswith(marker[:size]):
                held = max(held, size)
                break
    return held
