"""An answer's text written into the transcript line by line: code fences found as they
stream in, a finished line's Markdown styles merged over the token formats."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtGui import QFont, QTextBlockFormat, QTextCharFormat, QTextCursor, QTextDocument

from specchat.ui import palette as palettes
from specchat.ui.transcript.rich_text import code_block_format, style_fence_line, style_inline

_SPECIFIED_ONLY = QTextCharFormat.FontPropertiesInheritanceBehavior.FontPropertiesSpecifiedOnly


@dataclass
class _LineState:
    """Where the answer being streamed is, for code-fence detection."""

    line: str = ""
    line_start: int = 0
    fence_line: bool = False
    in_code: bool = False
    opening: bool = False  #: the fence line opens a block (rather than closing one)


class LineWriter:
    """Writes text into a transcript's document a piece at a time, keeping the line state.

    Attributes:
        palette: the colours in use.
    """

    def __init__(self, document: QTextDocument, palette: palettes.Palette, mono: QFont) -> None:
        self._document = document
        self.palette = palette
        self._mono = mono
        self._state = _LineState()

    def start(self, position: int) -> None:
        """A fresh line (out of any code block) begins at `position`."""
        self._state = _LineState(line_start=position)

    def moved(self, *, after: int, by: int) -> None:
        """Text ending at `after` grew by `by` characters: the line may lie after it."""
        if self._state.line_start >= after:
            self._state.line_start += by

    def blank(self, cursor: QTextCursor) -> bool:
        """Whether the cursor stands at the start of a line with nothing written on it."""
        return not self._state.line and cursor.position() == self._state.line_start

    def insert(self, cursor: QTextCursor, piece: str, fmt: QTextCharFormat) -> None:
        """Write `piece` (no newline in it) at the cursor."""
        state = self._state
        if state.in_code or state.fence_line:
            fmt = QTextCharFormat(fmt)
            fmt.setFont(self._mono, _SPECIFIED_ONLY)
        cursor.insertText(piece, fmt)
        state.line += piece
        if not state.fence_line and state.line.lstrip().startswith("```"):
            # The fence may arrive split over tokens: restyle the whole line once it is known.
            state.fence_line = True
            state.opening = not state.in_code
            self._style_code_line(cursor, state.line_start)

    def finish(self, cursor: QTextCursor) -> None:
        """The line is complete: a fence becomes a header (or footer), prose gets its
        Markdown styles; both merged over the token formats, the text unchanged."""
        state = self._state
        start, end = state.line_start, cursor.position()
        pal, mono = self.palette, self._mono
        if state.fence_line:
            style_fence_line(
                self._document, start, end, opening=state.opening, palette=pal, mono=mono
            )
            cursor.movePosition(QTextCursor.MoveOperation.End)
        elif not state.in_code and end > start:
            style_inline(self._document, start, end, palette=pal, mono=mono)
            cursor.movePosition(QTextCursor.MoveOperation.End)

    def end(self, cursor: QTextCursor, fmt: QTextCharFormat) -> None:
        """A newline: finish the line and open the next block (`fmt` carries the token)."""
        state = self._state
        self.finish(cursor)
        if state.fence_line:
            state.in_code = not state.in_code
        block = QTextBlockFormat()
        block.setLeftMargin(2)
        if state.in_code:
            # Code lines wrap (a long line never widens the transcript), marked on paint.
            block = code_block_format(self.palette)
        cursor.insertBlock(block, fmt)
        self._state = _LineState(line_start=cursor.position(), in_code=state.in_code)

    def _style_code_line(self, cursor: QTextCursor, start: int) -> None:
        line = QTextCursor(self._document)
        line.setPosition(start)
        line.setPosition(cursor.position(), QTextCursor.MoveMode.KeepAnchor)
        mono = QTextCharFormat()
        mono.setFont(self._mono, _SPECIFIED_ONLY)
        mono.setForeground(self.palette.muted_text)
        line.mergeCharFormat(mono)
        cursor.setBlockFormat(code_block_format(self.palette))
