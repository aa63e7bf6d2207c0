"""gpt-oss's harmony answers read as llama.cpp reads them (common/parsers/gpt-oss.cpp): a
run of messages, each a header (`<|channel|>analysis`, `final`, or `commentary` with a
recipient `to=functions.name`) and a body after `<|message|>`; analysis is the reasoning,
final the content, a message to a function a call with its body as arguments."""

from __future__ import annotations

import re

from specchat.host.answer_format.json_calls import Schemas
from specchat.host.answer_format.messages import Segment
from specchat.host.answer_format.thinking_splitter import marker_start

#: The markers, which the engine must spell in the answer's text (gpt-oss's vocabulary
#: makes them control tokens).
MARKERS = ("<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|constrain|>", "<|call|>")
_ENDS = ("<|end|>", "<|call|>", "<|return|>", "<|start|>")
_RECIPIENT = re.compile(r"to=functions\.([^\s<]+)")
_CHANNEL = re.compile(r"<\|channel\|>\s*(\w+)")


def segments(text: str, *, final: bool, schemas: Schemas | None = None) -> list[Segment]:
    """The messages of an answer's text as far as it says them: a header is read once its
    `<|message|>` is written, a body up to what may be the start of a marker (`final`: the
    whole text is written; a header never finished is dropped)."""
    del schemas  # its calls' arguments are JSON as written
    out: list[Segment] = []
    at = 0
    while at < len(text):
        body_at = text.find("<|message|>", at)
        if body_at < 0:
            break
        header = text[at:body_at]
        start = body_at + len("<|message|>")
        end, step = _body_end(text, start, final=final)
        kind, name = _kind(header)
        body = text[start:end]
        if kind:
            out.append(Segment(kind, body, name))
        if step < 0:
            break
        at = step
    return out


def _kind(header: str) -> tuple[str, str]:
    recipient = _RECIPIENT.search(header)
    if recipient is not None:
        return "call", recipient.group(1)
    channel = _CHANNEL.search(header)
    name = channel.group(1) if channel else ""
    if name == "analysis":
        return "reasoning", ""
    return "content", ""


def _body_end(text: str, start: int, *, final: bool) -> tuple[int, int]:
    """Where a body ends, and where the next message's header starts (-1: none yet)."""
    found = [(text.find(end, start), end) for end in _ENDS]
    hits = [(at, end) for at, end in found if at >= 0]
    if hits:
        at, end = min(hits)
        return at, at + (0 if end == "<|start|>" else len(end))
    if final:
        return len(text), -1
    return len(text) - marker_start(text[start:], _ENDS), -1
