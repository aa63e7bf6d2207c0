"""Labels that never push the panel around: one always takes the same number of lines, so
text coming and going never moves what is below it; one keeps to a line, ending in "…"
where it is too narrow, so a long value never widens the panel."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QSize, Qt
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget


class FixedLinesLabel(QLabel):
    """A word-wrapped label exactly `lines` lines tall, empty or not; text that would need
    more lines is cut at the last line, and the whole of it is in the tooltip.

    Attributes:
        lines: the label's height in lines of its font.
    """

    def __init__(self, text: str = "", *, lines: int = 1, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.lines = lines
        self.setWordWrap(True)
        # Top-aligned: a text too long for its lines loses its end, never its start.
        self.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        # Ignored width: a long text must not widen the panel; it wraps in what there is.
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self._fit_height()
        self.setText(text)

    def setText(self, text: str) -> None:
        super().setText(text)
        self.setToolTip(text)

    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.FontChange:
            self._fit_height()
        super().changeEvent(event)

    def _fit_height(self) -> None:
        margins = self.contentsMargins()
        self.setFixedHeight(
            self.fontMetrics().lineSpacing() * self.lines + margins.top() + margins.bottom()
        )


class ElidedLabel(QLabel):
    """A one-line label that shows as much of its text as its width allows, ending in "…":
    it asks for its whole text's width but gets by with `min_chars` characters.

    Attributes:
        min_chars: the narrowest it gets, in characters of its font.
    """

    def __init__(
        self, text: str = "", *, min_chars: int = 6, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.min_chars = min_chars
        self._full = text
        self._elide()

    def setText(self, text: str) -> None:
        self._full = text
        self._elide()
        self.updateGeometry()

    def text(self) -> str:
        """The whole text, however much of it shows."""
        return self._full

    def sizeHint(self) -> QSize:
        return QSize(self._width(self._full), super().sizeHint().height())

    def minimumSizeHint(self) -> QSize:
        narrowest = self._width("x" * self.min_chars)
        return QSize(min(narrowest, self.sizeHint().width()), super().minimumSizeHint().height())

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._elide()

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            self._elide()

    def _width(self, text: str) -> int:
        margins = self.contentsMargins()
        extra = margins.left() + margins.right() + 2 * self.margin()
        return self.fontMetrics().horizontalAdvance(text) + extra

    def _elide(self) -> None:
        shown = self.fontMetrics().elidedText(
            self._full, Qt.TextElideMode.ElideRight, self.contentsRect().width()
        )
        if shown != super().text():
            super().setText(shown)
