"""An answer as the transcript holds it: spans of text and how each token was made."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from specchat.engine.templates.thinking import Part, Piece, ThinkingStream
from specchat.engine.types import TokenEvent, TokenKind
from specchat.store.attachments import Attachment


@dataclass(frozen=True)
class Span:
    """A piece of an answer as shown.

    Attributes:
        text: the token's text.
        kind: how it was made.
        event: the engine's event (None for answers loaded from the store).
    """

    text: str
    kind: TokenKind
    event: TokenEvent | None = None


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
        pieces: an answer's text as settled so far, each piece thinking, reply or markup
            and naming the span it is part of (by index).
    """

    role: str
    spans: list[Span] = field(default_factory=list)
    ghosts: dict[int, str] = field(default_factory=dict)
    note: str = ""
    finished: bool = True
    attachments: tuple[Attachment, ...] = ()
    pieces: list[Piece[int]] = field(default_factory=list)
    _thinking: ThinkingStream[int] = field(default_factory=ThinkingStream, repr=False)

    def __post_init__(self) -> None:
        spans, self.spans = self.spans, []
        for span in spans:
            self.add(span)
        if self.finished:
            self.settle()

    def add(self, span: Span) -> list[Piece[int]]:
        """Append a span; the pieces it settles (a user's message is all reply)."""
        self.spans.append(span)
        index = len(self.spans) - 1
        if self.role != "assistant":
            new = [Piece(Part.ANSWER, span.text, index)]
        elif not span.text and not self._thinking.holding:
            # half a character: no text, but a token (and maybe a ghost) in its place
            part = Part.THINKING if self.thinking_now else Part.ANSWER
            new = [Piece(part, "", index)]
        else:
            new = self._thinking.feed(span.text, index)
        self.pieces.extend(new)
        return new

    def settle(self) -> list[Piece[int]]:
        """The pieces held back at the answer's end."""
        new = self._thinking.finish()
        self.pieces.extend(new)
        return new

    @property
    def thought(self) -> bool:
        """Whether the answer opened a thinking block."""
        return self._thinking.thought

    @property
    def thinking_now(self) -> bool:
        """Whether the answer is inside its thinking block."""
        return self._thinking.inside is not None

    @property
    def thinking_tokens(self) -> int:
        return len({p.payload for p in self.pieces if p.part is Part.THINKING})

    @property
    def text(self) -> str:
        """The reply: the answer less its thinking (a question's whole text)."""
        if not self.thought:
            return "".join(s.text for s in self.spans)
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
    for text, kind in token_kinds:
        try:
            spans.append(Span(str(text), TokenKind[str(kind)]))
        except KeyError:
            spans.append(Span(str(text), TokenKind.PLAIN))
    return spans
