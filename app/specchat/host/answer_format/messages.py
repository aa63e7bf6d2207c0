"""Answers written as a run of messages (gpt-oss's channels, Functionary 3.2's
recipients), read again as the text grows and what is new sent: each message's kind, and
its body as far as the text says it."""

from __future__ import annotations

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


class MessageReader:
    """Reads one answer written as a run of messages, fed in pieces: each time the text so
    far is read again and what it says beyond what was sent goes out (as llama.cpp's server
    streams it), so the pieces out add up to the whole answer's however the text arrives.

    Attributes:
        read: the format's reading of a text (`segments(text, final=..., schemas=...)`),
            each message's body as far as the text says it.
        tools: the functions offered, or None: a message to a function is then content.
        thinking: the text so far ends inside a message of thinking.
    """

    def __init__(
        self,
        read: Callable[..., list[Segment]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        new_id: Callable[[], str] = call_id,
    ) -> None:
        self.read = read
        self.tools = tools
        functions = [tool["function"] for tool in tools or ()]
        self._schemas = {str(f["name"]): f.get("parameters") or {} for f in functions}
        self._new_id = new_id
        self._text = ""
        self._reasoning = ""
        self._content = ""
        self._calls: list[tuple[str, str, str]] = []  # id, name, arguments sent
        self.thinking = False

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
        read = self.read(self._text, final=final, schemas=self._schemas)
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
