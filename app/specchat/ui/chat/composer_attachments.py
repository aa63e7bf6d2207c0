"""The composer's attachments: the paperclip button, the chips, and files dropped on the window."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, QObject, QRectF, QSize, Qt
from PySide6.QtGui import (
    QColor,
    QDragEnterEvent,
    QDragMoveEvent,
    QDropEvent,
    QIcon,
    QPainter,
    QPainterPath,
    QPen,
    QPixmap,
)
from PySide6.QtWidgets import QFileDialog, QFrame, QHBoxLayout, QLabel, QToolButton, QWidget

from specchat.engine.attachments import describe_size, estimate_tokens
from specchat.store.attachment_records import Attachment
from specchat.ui import palette as palettes
from specchat.ui.chat.attaching import PendingAttachments


def chip_text(attachment: Attachment) -> str:
    """A chip's label: name, size and (estimated) tokens."""
    tokens = estimate_tokens(attachment.text)
    return f"{attachment.name} · {describe_size(attachment.size)} · ≈{tokens:,} tokens"


def paperclip_icon(colour: QColor, *, size: int = 64) -> QIcon:
    """A paperclip drawn as a path (no emoji font needed), in `colour`."""
    path = QPainterPath()
    path.moveTo(15, 11)
    path.lineTo(15, 21)
    path.arcTo(QRectF(10, 18.5, 5, 5), 0, -180)
    path.lineTo(10, 8)
    path.arcTo(QRectF(10, 3, 10, 10), 180, -180)
    path.lineTo(20, 24)
    path.arcTo(QRectF(10, 19, 10, 10), 0, -180)
    pixmap = QPixmap(size, size)
    pixmap.fill(Qt.GlobalColor.transparent)
    painter = QPainter(pixmap)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.scale(size / 32, size / 32)
    painter.translate(16, 16)
    painter.rotate(40)
    painter.translate(-15, -16)
    pen = QPen(colour, 2.4)
    pen.setCapStyle(Qt.PenCapStyle.RoundCap)
    painter.setPen(pen)
    painter.drawPath(path)
    painter.end()
    return QIcon(pixmap)


class AttachButton(QToolButton):
    """The paperclip beside the composer: picks files to attach.

    Attributes:
        attachments: where the chosen files go.
    """

    def __init__(
        self,
        attachments: PendingAttachments,
        *,
        palette: palettes.Palette,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.attachments = attachments
        self.setObjectName("attachButton")
        self.set_palette(palette)
        self.setIconSize(QSize(22, 22))
        self.setToolTip(
            "Attach text files (or drop them on the window, or paste them)\n"
            "The text goes into your message and is a source of drafts"
        )
        self.setAccessibleName("Attach files")
        self.clicked.connect(self._on_clicked)

    def set_palette(self, palette: palettes.Palette) -> None:
        self.setIcon(paperclip_icon(palette.text))

    def _on_clicked(self) -> None:
        paths, _ = QFileDialog.getOpenFileNames(self, "Attach files", str(Path.home()))
        if paths:
            self.attachments.add_paths(Path(p) for p in paths)


class AttachmentChips(QWidget):
    """One chip per attached file above the composer, each with a button removing it.

    Attributes:
        attachments: the files shown.
        chips: the chip frames, in order.
    """

    def __init__(
        self,
        attachments: PendingAttachments,
        *,
        palette: palettes.Palette,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.attachments = attachments
        self.chips: list[QFrame] = []
        self._layout = QHBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._layout.addStretch(1)
        self.set_palette(palette)
        attachments.changed.connect(self._on_changed)
        self.hide()

    def set_palette(self, palette: palettes.Palette) -> None:
        self.setStyleSheet(
            f"#attachmentChip {{ background: {palette.code_background.name()};"
            f" border: 1px solid {palette.code_border.name()}; border-radius: 10px; }}"
        )

    def _on_changed(self) -> None:
        for chip in self.chips:
            self._layout.removeWidget(chip)
            chip.deleteLater()
        self.chips = [self._chip(i, a) for i, a in enumerate(self.attachments.items)]
        for position, chip in enumerate(self.chips):
            self._layout.insertWidget(position, chip)
        self.setVisible(bool(self.chips))

    def _chip(self, index: int, attachment: Attachment) -> QFrame:
        chip = QFrame()
        chip.setObjectName("attachmentChip")
        chip.setToolTip(
            f"{attachment.name}: {attachment.size:,} bytes read as {attachment.encoding}\n"
            "Tokens are estimated; the exact count is checked against the context on sending"
        )
        row = QHBoxLayout(chip)
        row.setContentsMargins(8, 1, 2, 1)
        row.addWidget(QLabel(chip_text(attachment)))
        remove = QToolButton()
        remove.setText("✕")
        remove.setAutoRaise(True)
        remove.setToolTip(f"Remove {attachment.name}")
        remove.setAccessibleName(f"Remove {attachment.name}")
        remove.clicked.connect(lambda: self.attachments.remove(index))
        row.addWidget(remove)
        return chip


class FileDrops(QObject):
    """Files dropped anywhere on a window are attached (an event filter on the window; the
    composer takes drops onto itself the same way through its paste path).

    Attributes:
        attachments: where dropped files go.
    """

    def __init__(self, window: QWidget, attachments: PendingAttachments) -> None:
        super().__init__(window)
        self.attachments = attachments
        window.setAcceptDrops(True)
        window.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        kind = event.type()
        if kind in (QEvent.Type.DragEnter, QEvent.Type.DragMove):
            assert isinstance(event, (QDragEnterEvent, QDragMoveEvent))
            if self.attachments.accepts(event.mimeData()):
                event.setDropAction(Qt.DropAction.CopyAction)
                event.accept()
                return True
        elif kind == QEvent.Type.Drop:
            assert isinstance(event, QDropEvent)
            if self.attachments.accepts(event.mimeData()):
                self.attachments.add_mime(event.mimeData())
                event.setDropAction(Qt.DropAction.CopyAction)
                event.accept()
                return True
        return super().eventFilter(watched, event)
