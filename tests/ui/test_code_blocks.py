"""Code blocks wrap inside the transcript (marked), fences become a header with a copy link,
and inline Markdown is styled over the token colours without changing the text."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QPointF, QUrl
from PySide6.QtGui import QColor, QFont, QGuiApplication, QImage, QPainter
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from specchat.engine.types import TokenKind
from specchat.ui.transcript.chat_view import TOKEN_PROPERTY, ChatView
from specchat.ui.transcript.rich_text import CODE_PROPERTY, paint_wrap_marks
from specchat.ui.transcript.spans import Span


def _view(qtbot: QtBot, pieces: list[str]) -> ChatView:
    view = ChatView()
    qtbot.addWidget(view)
    view.resize(600, 500)
    view.show()
    qtbot.waitExposed(view)
    view.add_answer(
        [Span(p, TokenKind.ACCEPTED if i % 2 else TokenKind.PLAIN) for i, p in enumerate(pieces)]
    )
    QApplication.processEvents()
    return view


def _blocks(view: ChatView) -> list[Any]:
    out, block = [], view.document().begin()
    while block.isValid():
        out.append(block)
        block = block.next()
    return out


def _format_at(view: ChatView, text: str, *, offset: int = 0) -> Any:
    position = view.document().toPlainText().index(text) + offset
    cursor = view.textCursor()
    cursor.setPosition(position + 1)
    return cursor.charFormat()


LONG = "result = compute(" + ", ".join(f"argument_{i}" for i in range(40)) + ")"


def test_long_code_lines_wrap_inside_the_block_with_a_mark(qtbot: QtBot) -> None:
    pieces = ["Here:\n", "```", "python\n", LONG, "\n", "```", "\nDone."]
    view = _view(qtbot, pieces)
    assert view.horizontalScrollBar().maximum() == 0
    code = [b for b in _blocks(view) if b.text().startswith("result")]
    assert len(code) == 1 and code[0].layout().lineCount() > 1
    image = QImage(view.viewport().size(), QImage.Format.Format_ARGB32)
    painter = QPainter(image)
    marks = paint_wrap_marks(
        painter,
        view.document(),
        view.document().begin(),
        offset=QPointF(0, 0),
        bottom=image.height(),
        colour=QColor("black"),
    )
    painter.end()
    assert marks == code[0].layout().lineCount() - 1
    assert "".join(t for t, _k, _e in view.painted_spans()) == "".join(pieces)


def test_fence_is_a_header_with_the_language_and_a_copy_link(qtbot: QtBot) -> None:
    pieces = ["Try", ":\n", "``", "`py", "thon\n", "x = 1\n", "print(x)\n", "```", "\nok"]
    view = _view(qtbot, pieces)
    blocks = _blocks(view)
    header = next(b for b in blocks if b.text().startswith("```python"))
    assert header.blockFormat().property(CODE_PROPERTY) == "open"
    assert "Copy" in header.text()
    # The backticks take no room; the language is the header's bold label.
    assert _format_at(view, "```python").fontPointSize() == 1.0
    assert _format_at(view, "python").fontWeight() == QFont.Weight.Bold
    closing = next(b for b in blocks if b.text() == "```")
    assert closing.blockFormat().property(CODE_PROPERTY) == "close"
    link = _format_at(view, "Copy")
    assert link.isAnchor() and link.anchorHref().startswith("copy:")
    view.anchorClicked.emit(QUrl(link.anchorHref()))
    assert QGuiApplication.clipboard().text() == "x = 1\nprint(x)"
    # The answer's tokens are all still there, in order; the link is no token.
    assert "".join(t for t, _k, _e in view.painted_spans()) == "".join(pieces)


def test_inline_markdown_is_styled_over_token_colours(qtbot: QtBot) -> None:
    pieces = ["Use ", "**bo", "ld**", " and ", "*it*", " with ", "`x`", "\n", "- item", "\nend"]
    view = _view(qtbot, pieces)
    bold = _format_at(view, "bold")
    assert bold.fontWeight() == QFont.Weight.Bold
    assert bold.property(TOKEN_PROPERTY) is not None
    assert bold.background() == view.palette_.token_background[TokenKind.ACCEPTED]
    assert _format_at(view, "**bo").fontPointSize() == 1.0  # the markers are hidden
    assert _format_at(view, "it*").fontItalic()
    code = _format_at(view, "x`")
    families = view.document().defaultFont().families()
    assert code.font().fixedPitch() or code.fontFamilies() != families
    item = next(b for b in _blocks(view) if "item" in b.text())
    assert item.text().startswith("•")
    assert "".join(t for t, _k, _e in view.painted_spans()) == "".join(pieces)


def test_a_users_code_block_is_shown_like_an_answers(qtbot: QtBot) -> None:
    view = ChatView()
    qtbot.addWidget(view)
    view.add_user("Fix this:\n```python\nx = 1\n```\nThanks **a lot**")
    header = next(b for b in _blocks(view) if b.text().startswith("```python"))
    assert header.blockFormat().property(CODE_PROPERTY) == "open"
    assert _format_at(view, "a lot").fontWeight() == QFont.Weight.Bold
    assert view.painted_spans() == []  # no answer, and the user's text is no token
