"""An answer's thinking in the transcript: a header line that folds it open, its count of
tokens, and the look of its text (the speculation colours kept)."""

from __future__ import annotations

from PySide6.QtCore import QUrl
from PySide6.QtGui import QTextCharFormat, QTextCursor

from specchat.ui import palette as palettes

#: The header link's scheme; its path is the message's index.
THOUGHT_SCHEME = "thought"


def header_text(tokens: int, *, thinking_now: bool, is_open: bool) -> str:
    arrow = "▾" if is_open else "▸"
    count = f"{tokens} token{'' if tokens == 1 else 's'}"
    return f"{arrow} {'Thinking…' if thinking_now else 'Thought'} · {count}"


def header_format(message: int, palette: palettes.Palette) -> QTextCharFormat:
    """The header's look: a link that opens or shuts the `message`-th message's thinking."""
    link = QTextCharFormat()
    link.setAnchor(True)
    link.setAnchorHref(f"{THOUGHT_SCHEME}:{message}")
    link.setForeground(palette.muted_text)
    return link


def insert_header(
    cursor: QTextCursor, text: str, message: int, palette: palettes.Palette
) -> tuple[int, int]:
    """Insert the header at the cursor; where its text starts and ends."""
    start = cursor.position()
    cursor.insertText(text, header_format(message, palette))
    return start, cursor.position()


def thinking_format(token_format: QTextCharFormat, palette: palettes.Palette) -> QTextCharFormat:
    """A thinking token's look: its token format (background, underline) in muted italics."""
    fmt = QTextCharFormat(token_format)
    fmt.setFontItalic(True)
    fmt.setForeground(palette.muted_text)
    return fmt


def thought_of(url: QUrl) -> int | None:
    """The message whose thinking a header link names, or None for another link."""
    if url.scheme() != THOUGHT_SCHEME:
        return None
    try:
        return int(url.path())
    except ValueError:
        return None
