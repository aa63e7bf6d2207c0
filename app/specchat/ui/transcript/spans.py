"""An answer as the transcript holds it: spans of text and how each token was made."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

from specchat.engine.types import TokenEvent, TokenKind
from specchat.store.attachment_records import Attachment
from specchat.store.conversations import THINKING, THINKING_MARKUP


class Part(enum.Enum):
    """Which part of an answer a piece of its text belongs to."""

    THINKING = enum.auto()
    ANSWER = enum.auto()
    #: the thinking begins here (its marker, if any, is not painted): markup
    OPENING = enum.auto()
    #: the thinking ended here: markup
    CLOSING = enum.auto()


@dataclass(frozen=True)
class Piece:
    """A piece of an answer's text, the part it belongs to and the span it is of.

    Attributes:
        part: thinking, answer, or where the thinking opens or closes.
        text: the text.
        payload: the index of the span it is of.
    """

    part: Part
    text: str
    payload: int


@dataclass(frozen=True)
class Span:
    """A piece of an answer as shown.

    Attributes:
        text: the token's text.
        kind: how it was made.
        event: the engine's event (None for answers loaded from the store).
        thinking: its thinking tag as the worker's answer reader read it (THINKING,
            THINKING_MARKUP, or "" for reply).
    """

    text: str
    kind: TokenKind
    event: TokenEvent | None = None
    thinking: str = ""


@dataclass
class Message:
    """One message of the transcript.

    Attributes:
        role: "user" or "assistant".
        spans: its text: a span per token for an answer, one span for a question.
        ghosts: rejected draft text shown before span i (only where a round corrected one).
        note: what is said after it ("unfinished", "stopped").
        finished: whether it is complete.
        attachments: the files attached to a question.
        pieces: an answer's text, each piece thinking, reply or where the thinking opens
            or closes, naming the span it is part of (by index); only its first thinking
            block folds, as the spans' tags say.
        thought: whether the answer opened a thinking block.
        thinking_now: whether the answer is inside it.
    """

    role: str
    spans: list[Span] = field(default_factory=list)
    ghosts: dict[int, str] = field(default_factory=dict)
    note: str = ""
    finished: bool = True
    attachments: tuple[Attachment, ...] = ()
    pieces: list[Piece] = field(default_factory=list)
    thought: bool = False
    thinking_now: bool = False

    def __post_init__(self) -> None:
        spans, self.spans = self.spans, []
        for span in spans:
            self.add(span)

    def add(self, span: Span) -> list[Piece]:
        """Append a span; the pieces it makes (a user's message is all reply)."""
        self.spans.append(span)
        index = len(self.spans) - 1
        new: list[Piece] = []
        tag = span.thinking if self.role == "assistant" else ""
        if tag and not self.thought:
            self.thought = self.thinking_now = True
            new.append(Piece(Part.OPENING, "", index))
        elif self.thinking_now and (not tag or (tag == THINKING_MARKUP and self._inner)):
            # the reply begins, or the marker closing the thinking came
            self.thinking_now = False
            new.append(Piece(Part.CLOSING, "", index))
        if tag != THINKING_MARKUP:
            part = Part.THINKING if self.thinking_now and tag else Part.ANSWER
            new.append(Piece(part, span.text, index))
        self.pieces.extend(new)
        return new

    def settle(self) -> list[Piece]:
        """The pieces held back at the answer's end (none: each token's part is known)."""
        return []

    @property
    def _inner(self) -> bool:
        """Whether the thinking block holds text already (a marker now closes it)."""
        return any(p.part is Part.THINKING for p in self.pieces)

    @property
    def thinking_tokens(self) -> int:
        return len({p.payload for p in self.pieces if p.part is Part.THINKING})

    @property
    def text(self) -> str:
        """The reply: the answer less its thinking (a question's whole text)."""
        if not self.thought:
            return "".join(s.text for s in self.spans if s.thinking != THINKING_MARKUP)
        return "".join(p.text for p in self.pieces if p.part is Part.ANSWER).lstrip("\n")

    @property
    def thinking_text(self) -> str:
        return "".join(p.text for p in self.pieces if p.part is Part.THINKING).strip("\n")


def span_tooltip(span: Span) -> str:
    """Kind, round, position, p_target and p_draft of a span's token, and where a draft came
    from."""
    name = span.kind.name.lower()
    event = span.event
    text = repr(span.text)
    if event is None:
        return f"{name} {text}"
    p_draft = "—" if event.p_draft is None else f"{event.p_draft:.3f}"
    found = f"\ndrafted from {event.origin}" if event.origin else ""
    return (
        f"{name} {text}\nround {event.round_index}, position {event.position}\n"
        f"p_target {event.p_target:.3f}, p_draft {p_draft}{found}"
    )


def spans_from_store(token_kinds: Sequence[Sequence[str]] | None, content: str) -> list[Span]:
    """Spans of a stored answer (plain text when it was stored without kinds)."""
    if not token_kinds:
        return [Span(content, TokenKind.PLAIN)] if content else []
    spans = []
    for text, kind, *tag in token_kinds:
        thinking = str(tag[0]) if tag and tag[0] in (THINKING, THINKING_MARKUP) else ""
        try:
            spans.append(Span(str(text), TokenKind[str(kind)], thinking=thinking))
        except KeyError:
            spans.append(Span(str(text), TokenKind.PLAIN, thinking=thinking))
    return spans
