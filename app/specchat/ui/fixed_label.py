"""A label that always takes the same number of lines, so text coming and going never moves
what is below it."""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt
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
