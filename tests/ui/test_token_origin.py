"""A kept draft token's tooltip says where the draft was found."""

from __future__ import annotations

from specchat.engine.types import TokenEvent, TokenKind
from specchat.ui.transcript.spans import Span, span_tooltip


def event(origin: str) -> TokenEvent:
    return TokenEvent(TokenKind.ACCEPTED, 7, "x", 0.9, 1.0, 3, 1, 2.5, origin=origin)


def test_the_tooltip_names_the_drafts_origin() -> None:
    assert span_tooltip(Span("x", TokenKind.ACCEPTED, event("an earlier chat"))).endswith(
        "drafted from an earlier chat"
    )
    assert "drafted from" not in span_tooltip(Span("x", TokenKind.ACCEPTED, event("")))
