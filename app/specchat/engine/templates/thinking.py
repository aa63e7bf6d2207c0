"""Where a model's thinking begins and ends in its answer, as its chat template marks it, and an
answer split into thinking and reply as it streams."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

Payload = TypeVar("Payload")


@dataclass(frozen=True)
class ThinkingMarkers:
    """The texts a family writes around its thinking.

    Attributes:
        open: what opens a thinking block.
        close: what closes it.
    """

    open: str
    close: str


#: The families' thinking markers: the one table the window, the exports and the API's
#: readers (host/answer_format builds its ThinkingSyntax values from these) all use.
#: Qwen3 / 3.5, DeepSeek R1, GLM and most others write `<think>…</think>`.
THINK_TAGS = ThinkingMarkers("<think>", "</think>")
#: Gemma 4 opens its thought channel with `<|channel>thought`.
GEMMA4_CHANNEL = ThinkingMarkers("<|channel>thought", "<channel|>")
#: Magistral and Ministral 3.
MISTRAL_TAGS = ThinkingMarkers("[THINK]", "[/THINK]")
#: Seed-OSS.
SEED_TAGS = ThinkingMarkers("<seed:think>", "</seed:think>")
#: Cohere Command R7B and North.
COHERE_TAGS = ThinkingMarkers("<|START_THINKING|>", "<|END_THINKING|>")
#: MiniMax M3.
MINIMAX_M3_TAGS = ThinkingMarkers("<mm:think>", "</mm:think>")
#: Apriel 1.6: its assistant turn is reasoning until `[BEGIN FINAL RESPONSE]`.
APRIEL16_TAGS = ThinkingMarkers("<|begin_assistant|>", "[BEGIN FINAL RESPONSE]")
#: Those an answer may open with, longest first where one begins another: Gemma's comes
#: before `<think>` (a `<think>` family's template may quote a channel in a comment).
KNOWN_MARKERS = (
    GEMMA4_CHANNEL,
    THINK_TAGS,
    MISTRAL_TAGS,
    SEED_TAGS,
    COHERE_TAGS,
    MINIMAX_M3_TAGS,
    APRIEL16_TAGS,
)


def thinking_markers(template_source: str) -> ThinkingMarkers | None:
    """The markers a chat template writes around thinking, or None when it writes none."""
    for markers in KNOWN_MARKERS:
        if markers.open in template_source and markers.close in template_source:
            return markers
    return None


def opens_inside(prompt: str, markers: ThinkingMarkers) -> bool:
    """Whether an answer to `prompt` starts inside a thinking block: the template's
    generation prompt opened one and did not close it (Qwen3.5 ends it with `<think>\\n`)."""
    opened = prompt.rfind(markers.open)
    return opened >= 0 and prompt.find(markers.close, opened) < 0


class Part(enum.Enum):
    """Which part of an answer a piece of its text belongs to."""

    THINKING = enum.auto()
    ANSWER = enum.auto()
    #: what opens the thinking (its marker and any white space before it): markup
    OPENING = enum.auto()
    #: the marker closing the thinking: markup
    CLOSING = enum.auto()


@dataclass(frozen=True)
class Piece(Generic[Payload]):
    """A piece of streamed text, the part it belongs to and what it came with (a token).

    Attributes:
        part: thinking, answer, or the markup around the thinking.
        text: the text.
        payload: what the text was fed with; a fed text split at a marker gives pieces
            that share it.
    """

    part: Part
    text: str
    payload: Payload


class ThinkingStream(Generic[Payload]):
    """Splits an answer into thinking and reply as its texts arrive.

    An answer thinks when it opens with a family's marker (after white space only), so a
    stored answer tells its own thinking apart: the window stores an answer whose prompt
    opened the thinking with that marker in front. Text that could still be a marker is
    held until the next text decides it, as a stop string is; `finish` releases what is
    held. Only the first thinking block counts: a marker later in the reply is the reply's.

    Attributes:
        markers: the markers an answer may open with.
        inside: the markers of the thinking block the stream is in now, or None.
        thought: whether the answer opened a thinking block.
    """

    def __init__(
        self,
        markers: Sequence[ThinkingMarkers] = KNOWN_MARKERS,
        *,
        inside: ThinkingMarkers | None = None,
    ) -> None:
        self.markers = tuple(markers)
        self.inside = inside
        self.thought = inside is not None
        self._opening = inside is None and bool(self.markers)  # still at the answer's start
        self._held: list[tuple[str, Payload]] = []

    @property
    def holding(self) -> bool:
        """Whether text is held back, undecided."""
        return bool(self._held)

    def feed(self, text: str, payload: Payload) -> list[Piece[Payload]]:
        """The pieces `text` (with what was held) settles."""
        self._held.append((text, payload))
        return self._settle(final=False)

    def finish(self) -> list[Piece[Payload]]:
        """The pieces still held, at the answer's end."""
        return self._settle(final=True)

    def _settle(self, *, final: bool) -> list[Piece[Payload]]:
        joined = "".join(t for t, _ in self._held)
        if self._opening:
            stripped = joined.lstrip()
            opened = next((m for m in self.markers if stripped.startswith(m.open)), None)
            if opened is not None:
                self._opening, self.inside, self.thought = False, opened, True
                marked = len(joined) - len(stripped) + len(opened.open)
                return [*self._take(marked, Part.OPENING), *self._settle(final=final)]
            if not final and not any(m.open.startswith(stripped) for m in self.markers):
                final = True  # it can no longer open: settle it now
            if not final:
                return []
            self._opening = False
        if self.inside is None:
            return self._take(len(joined), Part.ANSWER)
        close = self.inside.close
        found = joined.find(close)
        if found >= 0:
            pieces = [*self._take(found, Part.THINKING), *self._take(len(close), Part.CLOSING)]
            self.inside = None
            return [*pieces, *self._take(len(joined) - found - len(close), Part.ANSWER)]
        keep = 0 if final else _partial_suffix(joined, close)
        return self._take(len(joined) - keep, Part.THINKING)

    def _take(self, length: int, part: Part) -> list[Piece[Payload]]:
        """The first `length` characters of what is held, as pieces of `part`."""
        pieces: list[Piece[Payload]] = []
        while length > 0 and self._held:
            text, payload = self._held[0]
            if len(text) <= length:
                pieces.append(Piece(part, text, payload))
                self._held.pop(0)
                length -= len(text)
            else:
                pieces.append(Piece(part, text[:length], payload))
                self._held[0] = (text[length:], payload)
                length = 0
        self._held = [(t, p) for t, p in self._held if t]
        return [piece for piece in pieces if piece.text]


def _partial_suffix(text: str, marker: str) -> int:
    """Length of the longest end of `text` that begins `marker`."""
    for length in range(min(len(text), len(marker) - 1), 0, -1):
        if marker.startswith(text[-length:]):
            return length
    return 0


def split_thinking(
    text: str,
    markers: Sequence[ThinkingMarkers] = KNOWN_MARKERS,
    *,
    inside: ThinkingMarkers | None = None,
) -> tuple[str, str]:
    """(thinking, reply) of a whole answer; thinking is "" where there is none."""
    stream: ThinkingStream[None] = ThinkingStream(markers, inside=inside)
    pieces = [*stream.feed(text, None), *stream.finish()]
    return _joined(pieces, Part.THINKING), _joined(pieces, Part.ANSWER)


def _joined(pieces: Iterable[Piece[None]], part: Part) -> str:
    return "".join(piece.text for piece in pieces if piece.part is part)
