"""Markdown in the transcript's document: code blocks with a header, a copy link and wrap
markers, and inline styles merged over the token colours (the text itself never changes)."""

from __future__ import annotations

from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontDatabase,
    QPainter,
    QTextBlock,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextFormat,
)

from specchat.ui import palette as palettes
from specchat.ui.transcript.markdown_style import Inline, inline_ranges

#: Char-format property marking ghost (rejected draft) text.
GHOST_PROPERTY = QTextFormat.Property.UserProperty + 2
#: Char-format property of text the view added (a bullet, the copy link): no token, no answer.
DECOR_PROPERTY = QTextFormat.Property.UserProperty + 3
#: Block-format property: "code" for a code line, "open"/"close" for a fence line.
CODE_PROPERTY = QTextFormat.Property.UserProperty + 4
#: The copy link's scheme; its path is the fence header's block number.
COPY_SCHEME = "copy"
#: Code lines wrap with a hanging indent; the continuation mark sits in it.
_CODE_MARGIN = 10
_WRAP_INDENT = 16
WRAP_MARK = "↪"
_SPECIFIED_ONLY = QTextCharFormat.FontPropertiesInheritanceBehavior.FontPropertiesSpecifiedOnly


def monospace() -> QFont:
    """The system's fixed-width font, for code."""
    font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
    font.setStyleHint(QFont.StyleHint.Monospace)
    return font


def plain_text_of_markdown(markdown: str) -> str:
    """What a Markdown answer reads as without its markup."""
    doc = QTextDocument()
    doc.setMarkdown(markdown)
    return doc.toPlainText()


def code_block_format(palette: palettes.Palette, kind: str = "code") -> QTextBlockFormat:
    """A code line (wrapping, continuation lines indented) or a fence line (header/footer)."""
    block = QTextBlockFormat()
    block.setProperty(CODE_PROPERTY, kind)
    block.setLeftMargin(_CODE_MARGIN + _WRAP_INDENT)
    block.setTextIndent(-_WRAP_INDENT)
    block.setRightMargin(10)
    block.setBackground(palette.code_border if kind == "open" else palette.code_background)
    if kind == "open":
        block.setTopMargin(4)
    return block


def _hidden(palette: palettes.Palette) -> QTextCharFormat:
    """Markup characters: kept in the text (tokens stay whole) but take no room."""
    fmt = QTextCharFormat()
    fmt.setFontPointSize(1.0)
    fmt.setForeground(QColor(Qt.GlobalColor.transparent))
    return fmt


def _line_positions(doc: QTextDocument, start: int, end: int) -> tuple[str, list[int]]:
    """The answer's own characters between `start` and `end` (ghosts and decor left out),
    with their document positions."""
    chars: list[str] = []
    positions: list[int] = []
    block = doc.findBlock(start)
    it = block.begin()
    while not it.atEnd():
        fragment = it.fragment()
        fmt = fragment.charFormat()
        if not fmt.property(GHOST_PROPERTY) and not fmt.property(DECOR_PROPERTY):
            for i, char in enumerate(fragment.text()):
                position = fragment.position() + i
                if start <= position < end:
                    chars.append(char)
                    positions.append(position)
        it += 1
    return "".join(chars), positions


def _merge(doc: QTextDocument, start: int, end: int, fmt: QTextCharFormat) -> None:
    cursor = QTextCursor(doc)
    cursor.setPosition(start)
    cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
    cursor.mergeCharFormat(fmt)


def style_fence_line(
    doc: QTextDocument,
    start: int,
    end: int,
    *,
    opening: bool,
    palette: palettes.Palette,
    mono: QFont,
) -> None:
    """A complete ``` line: the backticks hidden, the language as the block's header, and
    after it a link that copies the block."""
    text, positions = _line_positions(doc, start, end)
    cursor = QTextCursor(doc)
    cursor.setPosition(start)
    cursor.setBlockFormat(code_block_format(palette, "open" if opening else "close"))
    ticks = len(text) - len(text.lstrip())
    ticks += len(text.lstrip()) - len(text.lstrip().lstrip("`"))
    if ticks and positions:
        _merge(doc, positions[0], positions[ticks - 1] + 1, _hidden(palette))
    if not opening:
        return
    language = QTextCharFormat()
    language.setFont(mono, _SPECIFIED_ONLY)
    language.setFontWeight(QFont.Weight.Bold)
    language.setForeground(palette.muted_text)
    if ticks < len(positions):
        _merge(doc, positions[ticks], positions[-1] + 1, language)
    link = QTextCharFormat()
    link.setProperty(DECOR_PROPERTY, True)
    link.setAnchor(True)
    link.setAnchorHref(f"{COPY_SCHEME}:{doc.findBlock(start).blockNumber()}")
    link.setForeground(palette.text)
    link.setFontUnderline(True)
    link.setToolTip("Copy this code block")
    cursor.setPosition(end)
    gap = QTextCharFormat()
    gap.setProperty(DECOR_PROPERTY, True)
    cursor.insertText("" if ticks < len(text) else "code", _decor(language))
    cursor.insertText("    ", gap)
    cursor.insertText("Copy", link)


def _decor(fmt: QTextCharFormat) -> QTextCharFormat:
    out = QTextCharFormat(fmt)
    out.setProperty(DECOR_PROPERTY, True)
    return out


def style_inline(
    doc: QTextDocument, start: int, end: int, *, palette: palettes.Palette, mono: QFont
) -> None:
    """Bold, italics, inline code, headings and list bullets of one complete prose line."""
    text, positions = _line_positions(doc, start, end)
    if not text.strip():
        return
    bullet_at: int | None = None
    for found in inline_ranges(text):
        if found.start >= found.end:
            continue
        begin, finish = positions[found.start], positions[found.end - 1] + 1
        fmt = QTextCharFormat()
        if found.kind in (Inline.MARKER, Inline.BULLET):
            fmt = _hidden(palette)
            if found.kind == Inline.BULLET:
                bullet_at = begin
                finish = positions[min(found.end, len(positions) - 1)] + 1  # and its space
        elif found.kind == Inline.BOLD:
            fmt.setFontWeight(QFont.Weight.Bold)
        elif found.kind == Inline.ITALIC:
            fmt.setFontItalic(True)
        elif found.kind == Inline.CODE:
            fmt.setFont(mono, _SPECIFIED_ONLY)
        elif found.kind == Inline.HEADING:
            fmt.setFontWeight(QFont.Weight.Bold)
            fmt.setFontPointSize(doc.defaultFont().pointSizeF() * 1.15)
        _merge(doc, begin, finish, fmt)
    if bullet_at is not None:
        # Inserted last: the positions above were read before it moved them.
        cursor = QTextCursor(doc)
        cursor.setPosition(bullet_at)
        bullet = QTextCharFormat()
        bullet.setProperty(DECOR_PROPERTY, True)
        cursor.insertText("•  ", bullet)


def code_text(doc: QTextDocument, header_block: int) -> str:
    """The code under the fence header at block number `header_block` (what Copy copies)."""
    lines: list[str] = []
    block = doc.findBlockByNumber(header_block).next()
    while block.isValid() and block.blockFormat().property(CODE_PROPERTY) == "code":
        text, _positions = _line_positions(doc, block.position(), block.position() + block.length())
        lines.append(text.rstrip("\u2029"))
        block = block.next()
    return "\n".join(lines)


def paint_wrap_marks(
    painter: QPainter,
    doc: QTextDocument,
    first: QTextBlock,
    *,
    offset: QPointF,
    bottom: float,
    colour: QColor,
) -> int:
    """Draw WRAP_MARK before every continuation line of the code lines from `first` down to
    `bottom` (viewport coordinates; `offset` = document origin in the viewport). Returns how
    many were drawn."""
    layout = doc.documentLayout()
    painter.setPen(colour)
    drawn = 0
    block = first
    while block.isValid():
        rect = layout.blockBoundingRect(block).translated(offset)
        if rect.top() > bottom:
            break
        text_layout = block.layout()
        if block.blockFormat().property(CODE_PROPERTY) == "code" and text_layout.lineCount() > 1:
            for i in range(1, text_layout.lineCount()):
                line = text_layout.lineAt(i)
                x = rect.left() + line.x() - _WRAP_INDENT + 2
                y = rect.top() + line.y() + line.ascent()
                painter.drawText(QPointF(x, y), WRAP_MARK)
                drawn += 1
        block = block.next()
    return drawn


def paint_note(
    painter: QPainter, doc: QTextDocument, note: str, *, offset: QPointF, colour: QColor
) -> None:
    """`note` in italics just below the document's last line (viewport coordinates)."""
    last = doc.lastBlock()
    rect = doc.documentLayout().blockBoundingRect(last).translated(offset)
    font = QFont(doc.defaultFont())
    font.setItalic(True)
    painter.setFont(font)
    painter.setPen(colour)
    baseline = rect.bottom() + painter.fontMetrics().ascent() + 2
    painter.drawText(QPointF(rect.left() + doc.documentMargin() + 2, baseline), note)


def token_runs(
    document: QTextDocument, start: int, end: int | None, token_property: int
) -> list[tuple[int, str]]:
    """The text of each run of characters from `start` to `end` (None: the document's end)
    whose format carries the same token index under `token_property`, in order; ghost text
    and untokened text (headers, notes) skipped. A newline inside a token became a block
    break carrying the token's format, so it is read back from the block's format."""
    runs: list[tuple[int, str]] = []

    def add(token: object, text: str) -> None:
        if token is None:
            return
        if runs and runs[-1][0] == token:
            runs[-1] = (runs[-1][0], runs[-1][1] + text)
        else:
            runs.append((int(token), text))  # type: ignore[call-overload]

    block = document.findBlock(start)
    while block.isValid() and (end is None or block.position() < end):
        if block.position() > start:
            add(block.charFormat().property(token_property), "\n")
        it = block.begin()
        while not it.atEnd():
            fragment = it.fragment()
            fmt = fragment.charFormat()
            if not fmt.property(GHOST_PROPERTY):
                add(fmt.property(token_property), fragment.text())
            it += 1
        block = block.next()
    return runs
