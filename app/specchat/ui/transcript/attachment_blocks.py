"""A message's attachments in the transcript: a header line each that folds its text open."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QUrl
from PySide6.QtGui import QFont, QTextBlockFormat, QTextCharFormat, QTextCursor

from specchat.engine.attachments import describe_size
from specchat.store.attachment_records import Attachment
from specchat.ui import palette as palettes
from specchat.ui.transcript.rich_text import code_block_format

#: The header link's scheme; its path is "message/position".
ATTACHMENT_SCHEME = "attachment"

#: Which attachment a header names: (message index, position in the message).
Fold = tuple[int, int]


def header_text(attachment: Attachment, *, is_open: bool) -> str:
    arrow = "▾" if is_open else "▸"
    size = describe_size(attachment.size)
    return f"{arrow} Attached: {attachment.name} · {size} · {attachment.encoding}"


def insert_attachments(
    cursor: QTextCursor,
    attachments: Sequence[Attachment],
    message: int,
    expanded: set[Fold],
    palette: palettes.Palette,
    mono: QFont,
) -> None:
    """Each attachment of the `message`-th message as a header line (a link that opens or
    shuts it) and, when in `expanded`, its text as a code block; the cursor ends in a fresh
    body block for the message's own text."""
    for position, attachment in enumerate(attachments):
        is_open = (message, position) in expanded
        link = QTextCharFormat()
        link.setAnchor(True)
        link.setAnchorHref(f"{ATTACHMENT_SCHEME}:{message}/{position}")
        link.setForeground(palette.muted_text)
        cursor.insertText(header_text(attachment, is_open=is_open), link)
        if is_open:
            code = QTextCharFormat()
            code.setFont(mono)
            for line in attachment.text.rstrip("\n").split("\n"):
                cursor.insertBlock(code_block_format(palette), code)
                cursor.insertText(line, code)
        body = QTextBlockFormat()
        body.setLeftMargin(2)
        cursor.insertBlock(body, QTextCharFormat())


def fold_of(url: QUrl) -> Fold | None:
    """The attachment a header link names, or None for another link."""
    if url.scheme() != ATTACHMENT_SCHEME:
        return None
    message, _, position = url.path().partition("/")
    try:
        return int(message), int(position)
    except ValueError:
        return None
