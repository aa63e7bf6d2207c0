"""An answer's text split, as it streams, into its content and its tool calls: text that may
open a call is held until it is known, a call's name is sent first and then its arguments
as they come."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from specchat.host.answer_format.json_calls import (
    Opening,
    Schemas,
    ToolSyntax,
    arguments_of,
    has_arguments,
    held_from,
    invalid_reason,
    value_end,
)


@dataclass(frozen=True)
class Reasoning:
    """More of the answer's thinking.

    Attributes:
        text: the text.
    """

    text: str


@dataclass(frozen=True)
class Content:
    """Answer text that is no call.

    Attributes:
        text: the text.
    """

    text: str


@dataclass(frozen=True)
class CallOpened:
    """A call begins: its name is known.

    Attributes:
        index: the call's place among the answer's calls.
        id: its id.
        name: the function called.
    """

    index: int
    id: str
    name: str


@dataclass(frozen=True)
class Arguments:
    """More of a call's arguments.

    Attributes:
        index: the call's place.
        text: the next part of its arguments' JSON text.
    """

    index: int
    text: str


Piece = Content | CallOpened | Arguments


@dataclass(frozen=True)
class SplitCall:
    """A whole call of the answer.

    Attributes:
        id: its id.
        name: the function called.
        arguments: its arguments as the model wrote them.
        problem: why they are not a JSON object ("" when they are).
    """

    id: str
    name: str
    arguments: str
    problem: str


@dataclass(frozen=True)
class ToolReply:
    """An answer read for tool calls.

    Attributes:
        content: its text outside the calls (white space beside a call dropped), or None
            when it is only calls.
        calls: its calls, in order.
    """

    content: str | None
    calls: tuple[SplitCall, ...]


def call_id() -> str:
    return "call_" + uuid.uuid4().hex[:24]


@dataclass
class _OpenCall:
    index: int
    id: str
    name: str
    start: int  # where its arguments start in the call's text
    sent: int  # how far they were sent
    said: str = ""  # a markup call's arguments sent so far (they are no slice of its text)


class CallSplitter:
    """Splits one answer's text, fed in pieces, into content and calls; the pieces out are
    the same whatever the text's division into pieces in.

    Attributes:
        syntax: the model's tool-call format.
        names: the functions the request offers (a loose opening's object is a call where
            it names one, or has its arguments), or None for any.
        single: the answer's first call is its last: what follows it is left out.
        schemas: the offered functions' parameters by name (they type a markup format's
            values).
        keep_lead: white space at the text's start is the answer's (what came before it,
            thinking, skipped the answer's own lead).
    """

    def __init__(
        self,
        syntax: ToolSyntax,
        *,
        names: Collection[str] | None = None,
        single: bool = False,
        schemas: Schemas | None = None,
        keep_lead: bool = False,
        new_id: Callable[[], str] = call_id,
    ) -> None:
        self.syntax = syntax
        self.keep_lead = keep_lead
        self.schemas = schemas or {}
        self._openings = syntax.openings_for(names or ())
        self.names = None if names is None else frozenset(names)
        self.single = single
        self._new_id = new_id
        self._pending = ""  # outside a call: text not yet said (it may open one)
        self._body: str | None = None  # inside a call: its text so far
        self._opening: Opening | None = None  # what opened it
        self._marker = ""  # the text that opened it (said as content if it names nothing)
        self._call: _OpenCall | None = None  # a call whose name was sent
        self._read = False  # a call of the open text was read whole
        self._space = ""  # white space held until text or a call follows it
        self._space_before = ""  # what was held when the open call opened
        self._after_call = False
        self._said = False
        self._content: list[str] = []
        self._calls: list[SplitCall] = []
        self._malformed = False

    @property
    def ended(self) -> bool:
        """A single call was read, or a malformed one: nothing more is taken (the answer may
        stop)."""
        return (self.single and bool(self._calls)) or self._malformed

    @property
    def in_call(self) -> bool:
        """Whether the text fed so far ends inside a call (its opening read, its end not)."""
        return self._body is not None

    def feed(self, text: str) -> list[Piece]:
        out: list[Piece] = []
        if self.ended:
            return out
        if self._body is None:
            self._pending += text
        else:
            self._body += text
        self._advance(out, final=False)
        return out

    def finish(self) -> list[Piece]:
        """The pieces held back; call once, after the last text."""
        out: list[Piece] = []
        if self.ended:
            return out
        self._advance(out, final=True)
        if self._body is not None:  # a call the answer's end closed (or cut short)
            self._close(self._body, "", out)
        if not self._calls and self._space:
            self._emit(self._space, out)
        self._space = ""
        return out

    def reply(self) -> ToolReply:
        """What was split so far (after `finish`: the whole answer)."""
        content = "".join(self._content)
        return ToolReply(content if content or not self._calls else None, tuple(self._calls))

    # --- outside a call ---------------------------------------------------------------------
    def _advance(self, out: list[Piece], *, final: bool) -> None:
        while not self.ended:
            if self._body is not None:
                if not self._inside(out):
                    return
                continue
            found = self._find_opening()
            if found is None:
                held = len(self._pending) if final else self._held()
                self._say(self._pending[:held], out)
                self._pending = self._pending[held:]
                return
            start, body_start, opening = found
            self._say(self._pending[:start], out)
            # White space before a call is the answer's text, as llama.cpp reads it, save
            # at the answer's start, which llama.cpp's parser skips (kept aside in case it
            # is no call).
            if self._space and (self.keep_lead or not self._at_start()):
                self._emit(self._space, out)
                self._space = ""
            self._space_before, self._space = self._space, ""
            self._body, self._opening, self._read = self._pending[body_start:], opening, False
            self._marker = self._pending[start:body_start]
            self._pending = ""

    def _at_start(self) -> bool:
        return not self._said and not self._calls

    def _find_opening(self) -> tuple[int, int, Opening] | None:
        best: tuple[int, int, Opening] | None = None
        for opening in self._openings:
            if opening.at_start:
                if not self._at_start():
                    continue
                start = len(self._pending) - len(self._pending.lstrip())
                if not self._pending.startswith(opening.marker, start):
                    continue
            else:
                start = self._pending.find(opening.marker)
                if start < 0:
                    continue
            if best is None or start < best[0]:
                body = start if opening.kept else start + len(opening.marker)
                best = (start, body, opening)
        return best

    def _held(self) -> int:
        """Where the text that may still open a call starts."""
        pending = self._pending
        held = len(pending)
        for opening in self._openings:
            if opening.at_start:  # one character: found whole or not at all
                continue
            for size in range(min(len(opening.marker) - 1, len(pending)), 0, -1):
                if pending.endswith(opening.marker[:size]):
                    held = min(held, len(pending) - size)
                    break
        return held

    def _say(self, text: str, out: list[Piece]) -> None:
        if self._after_call:
            text = text.lstrip()
            if not text:
                return
            self._after_call = False
        core = text.rstrip()
        if core:
            self._emit(self._space + core, out)
            self._space = text[len(core) :]
        else:
            self._space += text

    def _emit(self, text: str, out: list[Piece]) -> None:
        self._said = True
        self._content.append(text)
        out.append(Content(text))

    # --- inside a call ----------------------------------------------------------------------
    def _offered(self, name: str) -> bool:
        return self.names is None or name in self.names

    def _inside(self, out: list[Piece]) -> bool:
        """Go on with the open call; True when a call or the text it opened ended (what
        follows is then pending, or the rest of that text)."""
        body, opening = self._body, self._opening
        assert body is not None and opening is not None
        if self._call is None:
            # A name and then arguments: a call, whether or not its function is offered (the
            # client's agent tells the model there is no such tool, as it would any server's).
            head = self._head(opening, body)
            if head is not None:
                name, start = head
                self._call = _OpenCall(len(self._calls), self._new_id(), name, start, start)
                out.append(CallOpened(self._call.index, self._call.id, name))
        call = self._call
        if call is not None and self.syntax.markup is not None:
            return self._markup(call, body, opening, out)
        if call is not None and (end := value_end(body, call.start)) is not None:
            # Its arguments are whole: the call ends there, whatever follows (the brace
            # closing it, the closing, or a next call the model wrote without one).
            self._send(call, body, end, out)
            self._read_call(call, body[call.start : end])
            rest = body[end:].lstrip()
            self._body, self._marker = rest.removeprefix("}"), ""
            return True
        if opening.closing:
            at = body.find(opening.closing)
            if at >= 0:
                self._close(body[:at], opening.closing, out)
                self._pending = body[at + len(opening.closing) :]
                return True
        if call is not None:
            self._send(call, body, held_from(body, call.start, opening.closing), out)
        return False

    def _head(self, opening: Opening, body: str) -> tuple[str, int] | None:
        markup = self.syntax.markup
        if markup is None:
            return self.syntax.head(opening, body)
        if markup.head is None:
            return None
        # Only a function offered: another name is read once its call closes, as is a call
        # the format holds until it is known whole.
        head = markup.head(body)
        if head is None or not self._offered(head[0]):
            return None
        if markup.held is not None and markup.held(self.schemas.get(head[0])):
            return None
        return head

    def _markup(self, call: _OpenCall, body: str, opening: Opening, out: list[Piece]) -> bool:
        """Go on with a markup call whose name was sent; True when it closed."""
        at = body.find(opening.closing) if opening.closing else -1
        region = body if at < 0 else body[:at]
        self._say_arguments(call, region, final=at >= 0, out=out, closing=opening.closing)
        if at < 0:
            return False
        self._read_call(call, call.said)
        self._body, self._marker = None, ""
        self._opening, self._read = None, False
        self._pending = body[at + len(opening.closing) :]
        return True

    def _say_arguments(
        self, call: _OpenCall, region: str, *, final: bool, out: list[Piece], closing: str = ""
    ) -> None:
        markup = self.syntax.markup
        assert markup is not None and markup.so_far is not None
        text = markup.so_far(
            region, call.start, self.schemas, call.name, final=final, closing=closing
        )
        if not text.startswith(call.said):  # pragma: no cover - so_far continues itself
            raise AssertionError(f"{text!r} does not continue {call.said!r}")
        if len(text) > len(call.said):
            out.append(Arguments(call.index, text[len(call.said) :]))
            call.said = text

    def _send(self, call: _OpenCall, body: str, end: int, out: list[Piece]) -> None:
        if end > call.sent:
            out.append(Arguments(call.index, body[call.sent : end]))
            call.sent = end

    def _read_call(self, call: _OpenCall, arguments: str) -> None:
        self._calls.append(SplitCall(call.id, call.name, arguments, invalid_reason(arguments)))
        self._call, self._read, self._after_call = None, True, True

    def _close(self, region: str, closing: str, out: list[Piece]) -> None:
        call, opening, read = self._call, self._opening, self._read
        self._body, self._opening, self._read = None, None, False
        if call is not None and self.syntax.markup is not None:  # cut short
            self._say_arguments(call, region, final=True, out=out)
            self._read_call(call, call.said)
            self._read = False
            return
        if call is not None:  # its arguments never came whole: as written
            arguments = arguments_of(region, call.start)
            self._send(call, region[: call.start] + arguments, call.start + len(arguments), out)
            self._read_call(call, arguments)
            self._read = False
            return
        if read and not region.strip().strip("}").strip():
            return  # the end of a block whose calls were read
        parsed = self.syntax.parse(region, self.schemas)
        if parsed is not None and not parsed:
            # Malformed: llama.cpp's parser stops there, its lenient reading keeping the text
            # before the call and nothing from it on.
            self._malformed = True
            return
        if parsed and opening is not None and opening.loose and not has_arguments(region):
            # An object with a name alone is a call only where the name is a function offered.
            parsed = parsed if all(self._offered(c.name) for c in parsed) else None
        if not parsed:  # it names no function: the model's text, as written
            if not read:
                self._space = self._space_before
            self._say(self._marker + region + ("" if read else closing), out)
            return
        self._after_call = True
        for found in parsed[:1] if self.single else parsed:
            index, ident = len(self._calls), self._new_id()
            out.append(CallOpened(index, ident, found.name))
            if found.arguments:
                out.append(Arguments(index, found.arguments))
            problem = invalid_reason(found.arguments)
            self._calls.append(SplitCall(ident, found.name, found.arguments, problem))


def split_answer(
    syntax: ToolSyntax, texts: Iterable[str], *, names: Collection[str] | None = None
) -> tuple[list[Piece], ToolReply]:
    """A whole answer split at once: its pieces and what they make."""
    splitter = CallSplitter(syntax, names=names)
    pieces = [piece for text in texts for piece in splitter.feed(text)]
    pieces += splitter.finish()
    return pieces, splitter.reply()
