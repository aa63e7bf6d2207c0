"""Muse Glimmer's answers read as llama.cpp reads them (common/parsers/muse-glimmer.cpp): a
run of messages ` to=recipient<|message|>body`, each ended by `<|eom|>` (another follows,
after `<|start|>assistant`) or `<|eot|>`; `self` is the reasoning, `user` the content, a
function a call written in ATEM markup."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from specchat.host.answer_format.json_calls import Schemas
from specchat.host.answer_format.messages import Segment
from specchat.host.answer_format.qwen_xml import value_json
from specchat.host.answer_format.thinking_splitter import marker_start

#: The markers, which the engine must spell in the answer's text.
MARKERS = (
    "<|start|>",
    "<|message|>",
    "<|eom|>",
    "<|eot|>",
    "<atem:function_calls>",
    "</atem:function_calls>",
)
_ENDS = ("<|eom|>", "<|eot|>")
_RECIPIENT = re.compile(r"to=([^\s<]+)")
_INVOKE = re.compile(r'\s*<atem:function_calls>\s*<atem:invoke name="([^"]*)">')
_PARAMETER = re.compile(r'\s*<atem:parameter name="([^"]*)">')
_PARAMETER_END = "</atem:parameter>"
_INVOKE_END = "</atem:invoke>"


def segments(text: str, *, final: bool, schemas: Schemas | None = None) -> list[Segment]:
    """The messages of an answer's text as far as it says them: a header once its
    `<|message|>` is written, a body up to what may start an end (a call's arguments as far
    as whole parameters say them)."""
    out: list[Segment] = []
    at = 0
    while at < len(text):
        body_at = text.find("<|message|>", at)
        if body_at < 0:
            break
        recipient = _RECIPIENT.search(text, at, body_at)
        start = body_at + len("<|message|>")
        end, step = _body_end(text, start, final=final)
        body = text[start:end]
        name = recipient.group(1) if recipient else "user"
        if name == "self":
            out.append(Segment("reasoning", body))
        elif name == "user":
            out.append(Segment("content", body))
        else:
            out += _call(body, (schemas or {}).get(name), closed=step >= 0 or final)
        if step < 0:
            break
        at = step
    return out


def _call(body: str, parameters: Mapping[str, Any] | None, *, closed: bool) -> list[Segment]:
    """A message to a function: its invoke's name and its arguments' JSON text so far."""
    invoke = _INVOKE.match(body)
    if invoke is None:
        return []
    properties = (parameters or {}).get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    members = []
    at = invoke.end()
    while (parameter := _PARAMETER.match(body, at)) is not None:
        end = body.find(_PARAMETER_END, parameter.end())
        if end < 0:
            break
        key = parameter.group(1)
        value = value_json(body[parameter.end() : end], properties.get(key), own_line=False)
        members.append(json.dumps(key, ensure_ascii=False) + ":" + value)
        at = end + len(_PARAMETER_END)
    done = closed or _INVOKE_END in body[at:]
    return [Segment("call", "{" + ",".join(members) + ("}" if done else ""), invoke.group(1))]


def _body_end(text: str, start: int, *, final: bool) -> tuple[int, int]:
    """Where a body ends, and where the next message's header starts (-1: none yet)."""
    hits = [(at, end) for end in _ENDS if (at := text.find(end, start)) >= 0]
    if hits:
        at, end = min(hits)
        after = at + len(end)
        return at, after + len("<|start|>assistant") * text.startswith("<|start|>assistant", after)
    if final:
        return len(text), -1
    return len(text) - marker_start(text[start:], _ENDS), -1
