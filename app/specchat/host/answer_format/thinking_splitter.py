"""An answer's thinking told apart from the rest as it streams: a block the model opens at
its start (or the template opened in the prompt), what is inside it the reasoning."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from specchat.engine.templates.thinking import ThinkingMarkers


@dataclass(frozen=True)
class ThinkingSyntax:
    """How a family writes its thinking.

    Attributes:
        start: the text that opens it (`<think>`).
        ends: texts that close it (`</think>`), left out of both parts.
        stops: texts that end it and begin the answer's own text, kept there (Qwen3.5 may
            call a tool straight from its thinking: `<tool_call>`).
        anywhere: a block may open after text too, and an end with no block open is
            dropped (Gemma 4 writes a thought block between its texts, or a lone
            `<channel|>` at its end).
        trim_reasoning: white space at a block's start is no part of the reasoning.
        trim_answer: white space after a block's end is no part of the answer.
        start_space: white space after `start` that is no part of the reasoning, each
            character taken where it comes next (llama.cpp's `optspace` of the opening its
            template analysis found, `<think>\n`).
        end_space: the same after an end, before the answer (`</think>\n\n`).
        skip_lead: white space at the answer's start, before any block, is no part of it
            (llama.cpp's parser skips it after the generation prompt).
        prompt_reasons: the generation prompt writes the reasoning's first words after the
            opening (Apriel 1.6's "Here are my reasoning steps:"), which llama.cpp reads as
            reasoning.
    """

    start: str
    ends: tuple[str, ...]
    stops: tuple[str, ...] = ()
    anywhere: bool = False
    trim_reasoning: bool = False
    trim_answer: bool = False
    start_space: str = ""
    end_space: str = ""
    skip_lead: bool = False
    prompt_reasons: bool = False

    @classmethod
    def of(cls, markers: ThinkingMarkers, **reading: Any) -> ThinkingSyntax:
        """The syntax of a family whose thinking `markers` (engine/templates/thinking.py's
        table) open and close, read as `reading` says."""
        return cls(markers.open, (markers.close,), **reading)

    def prompt_part(self, prompt_tail: str) -> str:
        """The generation prompt's text from its thinking's opening on, which llama.cpp
        reads as the answer's start (`<think>\n`, or SmolLM3's closed `<think>\n\n</think>\n`):
        "" where it opened none (text other than white space and an end after the opening
        is an earlier turn's, not the generation prompt's)."""
        at = prompt_tail.rfind(self.start)
        if at < 0:
            return ""
        part = prompt_tail[at:]
        rest = part[len(self.start) :]
        for end in self.ends:
            rest = rest.replace(end, "", 1)
        return part if self.prompt_reasons or not rest.strip() else ""


class _State(enum.Enum):
    BEFORE = enum.auto()  #: at the answer's start: a block may still open
    INSIDE = enum.auto()
    AFTER = enum.auto()  #: the answer's own text


@dataclass(frozen=True)
class Part:
    """A part of the text fed, told apart.

    Attributes:
        reasoning: it is thinking (otherwise the answer's own text).
        text: the text.
    """

    reasoning: bool
    text: str


class ThinkingSplitter:
    """Splits one answer's text, fed in pieces, into its thinking and the rest; the parts
    out add up alike whatever the division in. White space around the thinking is kept or
    dropped as the family's llama.cpp reader does; thinking that is only white space is
    none (so a block's first space is held until text follows it).

    Attributes:
        syntax: the family's thinking markers.
    """

    def __init__(self, syntax: ThinkingSyntax, *, opened: bool = False) -> None:
        self.syntax = syntax
        self._state = _State.INSIDE if opened else _State.BEFORE
        self._held = ""
        self._fresh = True  # at a block's start: nothing but white space said yet
        self._lead = ""  # that white space, held
        self._trim_answer = opened and syntax.trim_answer
        self._skip = syntax.start_space if opened else ""  # white space yet to pass

    @property
    def thinking(self) -> bool:
        """Whether the text fed so far ends inside thinking."""
        return self._state is _State.INSIDE

    def feed(self, text: str) -> list[Part]:
        self._held += text
        return self._advance(final=False)

    def finish(self) -> list[Part]:
        """What was held back; call once after the last text. Thinking never closed (the
        answer cut short) is reasoning all the same."""
        return self._advance(final=True)

    def _advance(self, *, final: bool) -> list[Part]:
        out: list[Part] = []
        while True:
            if self._state is _State.BEFORE:
                stripped = self._held.lstrip()
                if stripped.startswith(self.syntax.start):
                    self._open(stripped[len(self.syntax.start) :])
                    continue
                if not final and (not stripped or self.syntax.start.startswith(stripped)):
                    return out
                if self.syntax.skip_lead:
                    self._held = stripped
                self._state = _State.AFTER
                continue
            if not self._pass_space(final=final):
                return out
            if self._state is _State.INSIDE:
                if not self._inside(out, final=final):
                    return out
                continue
            if not self.syntax.anywhere:
                self._answer(self._held, out)
                self._held = ""
                return out
            if not self._after(out, final=final):
                return out

    def _open(self, rest: str) -> None:
        self._held = rest
        self._state, self._trim_answer = _State.INSIDE, self.syntax.trim_answer
        self._fresh, self._lead = True, ""
        self._skip = self.syntax.start_space

    def _pass_space(self, *, final: bool) -> bool:
        """Pass the white space a marker's `optspace` takes: each of its characters where it
        comes next; False while the text held cannot tell yet."""
        while self._skip:
            if not self._held:
                if not final:
                    return False
                self._skip = ""
                break
            if self._held[0] == self._skip[0]:
                self._held = self._held[1:]
            self._skip = self._skip[1:]
        return True

    def _after(self, out: list[Part], *, final: bool) -> bool:
        """The answer's text, where a block may open again; True where one did."""
        held = self._held
        markers = [(held.find(m), m) for m in (self.syntax.start, *self.syntax.ends)]
        found = min(((at, m) for at, m in markers if at >= 0), default=None)
        if found is not None:
            at, marker = found
            self._answer(held[:at], out)
            if marker == self.syntax.start:
                self._open(held[at + len(marker) :])
                return True
            self._held = held[at + len(marker) :]  # an end with no block: dropped
            return True
        keep = 0 if final else marker_start(held, (self.syntax.start, *self.syntax.ends))
        self._answer(held[: len(held) - keep], out)
        self._held = held[len(held) - keep :]
        return False

    def _inside(self, out: list[Part], *, final: bool) -> bool:
        """Go on inside the block; True where it ended (the rest is then the answer's)."""
        held = self._held
        found: tuple[int, int] | None = None
        for marker in self.syntax.ends:
            at = held.find(marker)
            if at >= 0 and (found is None or at < found[0]):
                found = (at, at + len(marker))
        for marker in self.syntax.stops:
            at = held.find(marker)
            if at >= 0 and (found is None or at < found[0]):
                found = (at, at)
        if found is not None:
            self._reason(held[: found[0]], out, ended=True)
            self._held = held[found[1] :]
            self._state = _State.AFTER
            if found[1] > found[0]:  # an end (a stop begins the answer as it stands)
                self._skip = self.syntax.end_space
            return True
        if final:
            self._reason(held, out, ended=True)
            self._held = ""
            return False
        keep = marker_start(held, (*self.syntax.ends, *self.syntax.stops))
        self._reason(held[: len(held) - keep], out, ended=False)
        self._held = held[len(held) - keep :]
        return False

    def _reason(self, text: str, out: list[Part], *, ended: bool) -> None:
        if self._fresh:
            text = self._lead + text
            if not text.strip():  # only white space so far: none, if nothing follows
                self._lead = "" if ended else text
                return
            self._fresh, self._lead = False, ""
            if self.syntax.trim_reasoning:
                text = text.lstrip()
        if text:
            out.append(Part(True, text))

    def _answer(self, text: str, out: list[Part]) -> None:
        if self._trim_answer:
            text = text.lstrip()
            if not text:
                return
            self._trim_answer = False
        if text:
            out.append(Part(False, text))


def marker_start(text: str, markers: tuple[str, ...]) -> int:
    """How much of the text's end may be the start of one of `markers`."""
    longest = 0
    for marker in markers:
        for size in range(min(len(marker) - 1, len(text)), longest, -1):
            if text.endswith(marker[:size]):
                longest = size
                break
    return longest
