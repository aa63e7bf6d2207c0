"""A collapsible section: a header button with an arrow that shows or hides its content."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)


class Fold(QWidget):
    """A titled section that folds away, with a one-line summary beside a closed title.

    Attributes:
        button: the header (checkable: checked = open).
        summary: what the section holds, shown while it is closed.
        content: the section's widget.

    Signals:
        toggled(bool): opened (True) or closed.
    """

    toggled = Signal(bool)

    def __init__(
        self, title: str, content: QWidget, *, open_: bool = False, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.content = content
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        self.button = QToolButton()
        self.button.setText(title)
        self.button.setCheckable(True)
        self.button.setAutoRaise(True)
        self.button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.button.toggled.connect(self._on_toggled)
        self.summary = QLabel("")
        self.summary.setObjectName("fold_summary")
        self.summary.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        header = QWidget()
        row = _hbox(header)
        row.addWidget(self.button, 0, Qt.AlignmentFlag.AlignLeft)  # left also when open
        row.addWidget(self.summary, 1)
        layout.addWidget(header)
        layout.addWidget(content)
        self.button.setChecked(open_)
        self._on_toggled(open_)

    def is_open(self) -> bool:
        return self.button.isChecked()

    def set_open(self, open_: bool) -> None:
        self.button.setChecked(open_)

    def set_summary(self, text: str) -> None:
        self.summary.setText(text)
        self.summary.setToolTip(text)

    @Slot(bool)
    def _on_toggled(self, open_: bool) -> None:
        self.content.setVisible(open_)
        self.summary.setVisible(not open_)
        self.button.setArrowType(Qt.ArrowType.DownArrow if open_ else Qt.ArrowType.RightArrow)
        self.toggled.emit(open_)


def _hbox(widget: QWidget) -> QHBoxLayout:
    layout = QHBoxLayout(widget)
    layout.setContentsMargins(0, 0, 0, 0)
    return layout
