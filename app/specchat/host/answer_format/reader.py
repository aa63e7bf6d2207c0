"""An answer read back as it streams, in its family's format: its thinking, its text and
its tool calls, the pieces out the same however the text arrives."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specchat.host.answer_format.formats import AnswerFormat
from specchat.host.answer_format.messages import MessageReader
from specchat.host.answer_format.splitter import (
    Arguments,
    CallOpened,
    CallSplitter,
    Content,
    Reasoning,
    SplitCall,
    call_id,
)
from specchat.host.answer_format.thinking_splitter import Part, ThinkingSplitter, marker_start
from specchat.store.conversations import THINKING, THINKING_MARKUP

Piece = Reasoning | Content | CallOpened | Arguments


@dataclass(frozen=True)
class TokenRead:
    """How one token of an answer was read.

    Attributes:
        thinking: the text read was inside thinking before or after it (the API's
            reasoning tokens and the window's fold count it alike).
        in_call: likewise inside a tool call.
        markup: the token's whole text is (part of) the marker opening or closing the
            thinking, which the window does not paint (the first token of an opening spelt
            in several is markup before it is thinking).
    """

    thinking: bool
    in_call: bool
    markup: bool = False

    @property
    def tag(self) -> str:
        """The token's thinking tag as an answer's tokens are stored and shown: THINKING,
        THINKING_MARKUP, or "" for reply."""
        if self.markup:
            return THINKING_MARKUP
        return THINKING if self.thinking else ""


@dataclass(frozen=True)
class AnswerReply:
    """An answer read back.

    Attributes:
        content: its text outside thinking and calls, or None when it is only calls.
        reasoning: its thinking ("" for none).
        calls: its calls, in order.
    """

    content: str | None
    reasoning: str
    calls: tuple[SplitCall, ...]


class AnswerReader:
    """Reads one answer, fed in pieces, as its format writes it.

    Attributes:
        format: the family's format.
        tools: the functions offered (OpenAI's shape), or None: nothing is read as a call.

    `thinking_open`: the answer starts inside thinking; `thinking_prompt`: the generation
    prompt's text from its thinking's opening on (ThinkingSyntax.prompt_part), read as the
    answer's start as llama.cpp reads it.
    """

    def __init__(
        self,
        answer_format: AnswerFormat,
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        single: bool = False,
        thinking_open: bool = False,
        thinking_prompt: str = "",
        new_id: Callable[[], str] = call_id,
    ) -> None:
        self.format = answer_format
        self.tools = tools
        thinking = answer_format.thinking
        self._thinking = (
            None if thinking is None else ThinkingSplitter(thinking, opened=thinking_open)
        )
        self._calls: CallSplitter | None = None
        if tools is not None:
            functions = [tool["function"] for tool in tools]
            self._calls = CallSplitter(
                answer_format.tools,
                names=[str(f["name"]) for f in functions],
                schemas={str(f["name"]): f.get("parameters") or {} for f in functions},
                single=single,
                keep_lead=thinking is not None and thinking.skip_lead,
                new_id=new_id,
            )
        self._reasoning: list[str] = []
        self._content: list[str] = []
        # An answer with tools ends at the format's stops (the decoder stops there too).
        self._stops = answer_format.stops if tools is not None else ()
        self._stop_held = ""
        self._stopped = False
        self._dropped = answer_format.dropped
        self._drop_held = ""
        self._preface = thinking_prompt if thinking is not None else ""
        self._messages: MessageReader | None = None
        if answer_format.messages is not None:
            self._messages = MessageReader(answer_format.messages, tools=tools, new_id=new_id)

    @property
    def thinking(self) -> bool:
        """Whether the text fed so far ends inside thinking."""
        if self._messages is not None:
            return self._messages.thinking
        return self._thinking is not None and self._thinking.thinking

    @property
    def in_call(self) -> bool:
        """Whether the text fed so far ends inside a tool call."""
        return self._calls is not None and self._calls.in_call

    @property
    def ended(self) -> bool:
        """A single call was read: nothing more is taken (the answer may stop)."""
        return self._calls is not None and self._calls.ended

    def read_token(self, text: str) -> TokenRead:
        """Feed one token's text; how it was read (the one rule for the API and the window)."""
        if self._preface:
            self.feed("")  # the prompt's thinking is read first: the answer starts inside it
        before, in_call = self.thinking, self.in_call
        held = not self.feed(text)
        thinking = before or self.thinking
        return TokenRead(thinking, in_call or self.in_call, self._is_markup(text, before, held))

    def _is_markup(self, text: str, was_thinking: bool, held: bool) -> bool:
        syntax = self.format.thinking
        mark = text.strip()
        if syntax is None or not mark:
            return False
        if not (was_thinking or self.thinking):
            # the first token of an opening spelt in several (Gemma 4's `<|channel>`), held
            # by the reader until the next decides it: no reasoning yet, but no reply either
            return held and len(mark) > 1 and syntax.start.startswith(mark)
        markers = (syntax.start, *syntax.ends)
        if mark in markers:
            return True
        # the token of such a marker that crosses into or out of thinking (`thought`)
        return was_thinking != self.thinking and any(mark in marker for marker in markers)

    def feed(self, text: str) -> list[Piece]:
        if self._messages is not None:
            return list(self._messages.feed(text))
        text, self._preface = self._preface + text, ""
        text = self._cut(self._drop(text, final=False), final=False)
        if self._thinking is None:
            return self._answer(text, final=False)
        return self._parts(self._thinking.feed(text), final=False)

    def finish(self) -> list[Piece]:
        """The pieces held back; call once, after the last text."""
        if self._messages is not None:
            return list(self._messages.finish())
        text = self._cut(self._drop(self._preface, final=True), final=True)
        self._preface = ""
        if self._thinking is None:
            return self._answer(text, final=True)
        return self._parts([*self._thinking.feed(text), *self._thinking.finish()], final=True)

    def _drop(self, text: str, *, final: bool) -> str:
        """The text less the format's dropped markers; the end that may begin one held."""
        if not self._dropped:
            return text
        held = self._drop_held + text
        for marker in self._dropped:
            held = held.replace(marker, "")
        keep = 0 if final else marker_start(held, self._dropped)
        self._drop_held = held[len(held) - keep :]
        return held[: len(held) - keep]

    def _cut(self, text: str, *, final: bool) -> str:
        """The text before the first stop; the end that may begin one held back."""
        if not self._stops:
            return text
        if self._stopped:
            return ""
        held = self._stop_held + text
        found = [at for at in (held.find(stop) for stop in self._stops) if at >= 0]
        if found:
            self._stopped, self._stop_held = True, ""
            return held[: min(found)]
        keep = 0 if final else marker_start(held, self._stops)
        self._stop_held = held[len(held) - keep :]
        return held[: len(held) - keep]

    def reply(self) -> AnswerReply:
        """What was read so far (after `finish`: the whole answer)."""
        if self._messages is not None:
            content, reasoning, calls = self._messages.reply()
            return AnswerReply(content, reasoning, calls)
        reasoning = "".join(self._reasoning)
        if self._calls is None:
            return AnswerReply("".join(self._content), reasoning, ())
        split = self._calls.reply()
        return AnswerReply(split.content, reasoning, split.calls)

    def _parts(self, parts: Iterable[Part], *, final: bool) -> list[Piece]:
        out: list[Piece] = []
        for part in parts:
            if part.reasoning:
                self._reasoning.append(part.text)
                out.append(Reasoning(part.text))
            else:
                out += self._answer(part.text, final=False)
        if final:
            out += self._answer("", final=True)
        return out

    def _answer(self, text: str, *, final: bool) -> list[Piece]:
        if self._calls is None:
            if text:
                self._content.append(text)
                return [Content(text)]
            return []
        pieces: list[Piece] = list(self._calls.feed(text)) if text else []
        if final:
            pieces += self._calls.finish()
        return pieces


def read_answer(
    answer_format: AnswerFormat,
    texts: Iterable[str],
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    thinking_open: bool = False,
    thinking_prompt: str = "",
    new_id: Callable[[], str] = call_id,
) -> tuple[list[Piece], AnswerReply]:
    """A whole answer read at once: its pieces and what they make."""
    reader = AnswerReader(
        answer_format,
        tools=tools,
        thinking_open=thinking_open,
        thinking_prompt=thinking_prompt,
        new_id=new_id,
    )
    pieces = [piece for text in texts for piece in reader.feed(text)]
    pieces += reader.finish()
    return pieces, reader.reply()
