"""gpt-oss's harmony answers read as llama.cpp reads them (common/parsers/gpt-oss.cpp): a
run of messages, each a header (`<|channel|>analysis`, `final`, or `commentary` with a
recipient `to=functions.name`) and a body after `<|message|>`; analysis is the reasoning,
final the content, a message to a function a call with its body as arguments."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specchat.host.answer_format.json_calls import invalid_reason
from specchat.host.answer_format.splitter import (
    Arguments,
    CallOpened,
    Content,
    Reasoning,
    SplitCall,
    call_id,
)

#: The markers, which the engine must spell in the answer's text (gpt-oss's vocabulary
#: makes them control tokens).
MARKERS = ("<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|constrain|>", "<|call|>")
_ENDS = ("<|end|>", "<|call|>", "<|return|>", "<|start|>")
_RECIPIENT = re.compile(r"to=functions\.([^\s<]+)")
_CHANNEL = re.compile(r"<\|channel\|>\s*(\w+)")


@dataclass(frozen=True)
class Segment:
    """One message's reading so far.

    Attributes:
        kind: "reasoning", "content" or "call".
        text: its body so far (a call's arguments as written).
        name: a call's function ("" otherwise).
    """

    kind: str
    text: str
    name: str = ""


def segments(text: str, *, final: bool) -> list[Segment]:
    """The messages of an answer's text as far as it says them: a header is read once its
    `<|message|>` is written, a body up to what may be the start of a marker (`final`: the
    whole text is written; a header never finished is dropped)."""
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
    return len(text) - _marker_start(text[start:]), -1


def _marker_start(text: str) -> int:
    longest = 0
    for marker in _ENDS:
        for size in range(min(len(marker) - 1, len(text)), longest, -1):
            if text.endswith(marker[:size]):
                longest = size
                break
    return longest


class HarmonyReader:
    """Reads one harmony answer, fed in pieces: each time the text so far is read again and
    what it says beyond what was sent goes out (as llama.cpp's server streams it), so the
    pieces out add up to the whole answer's however the text arrives.

    Attributes:
        tools: the functions offered, or None: a message to a function is then content.
        thinking: the text so far ends inside an analysis message.
    """

    def __init__(
        self,
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        new_id: Callable[[], str] = call_id,
    ) -> None:
        self.tools = tools
        self._new_id = new_id
        self._text = ""
        self._reasoning = ""
        self._content = ""
        self._calls: list[tuple[str, str, str]] = []  # id, name, arguments sent
        self.thinking = False  # the text so far ends inside an analysis message

    def feed(self, text: str) -> Iterator[Reasoning | Content | CallOpened | Arguments]:
        self._text += text
        return self._read(final=False)

    def finish(self) -> Iterator[Reasoning | Content | CallOpened | Arguments]:
        return self._read(final=True)

    def reply(self) -> tuple[str | None, str, tuple[SplitCall, ...]]:
        """(content, reasoning, calls) so far; content None where the answer is only calls."""
        calls = tuple(
            SplitCall(ident, name, arguments, invalid_reason(arguments))
            for ident, name, arguments in self._calls
        )
        content = self._content if self._content or not calls else None
        return content, self._reasoning, calls

    def _read(self, *, final: bool) -> Iterator[Reasoning | Content | CallOpened | Arguments]:
        read = segments(self._text, final=final)
        self.thinking = bool(read) and read[-1].kind == "reasoning" and not final
        reasoning = "".join(s.text for s in read if s.kind == "reasoning")
        calls = [s for s in read if s.kind == "call" and self.tools is not None]
        content = "".join(
            s.text for s in read if s.kind == "content" or (s.kind == "call" and not calls)
        )
        if len(reasoning) > len(self._reasoning):
            yield Reasoning(reasoning[len(self._reasoning) :])
            self._reasoning = reasoning
        if len(content) > len(self._content):
            yield Content(content[len(self._content) :])
            self._content = content
        for index, call in enumerate(calls):
            if index == len(self._calls):
                self._calls.append((self._new_id(), call.name, ""))
                yield CallOpened(index, self._calls[index][0], call.name)
            ident, name, sent = self._calls[index]
            if len(call.text) > len(sent):
                yield Arguments(index, call.text[len(sent) :])
                self._calls[index] = (ident, name, call.text)
