"""The centre of the window: notices, the transcript, the colour legend and the composer."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QMimeData, Qt, Signal
from PySide6.QtGui import QAction, QKeyEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from specchat.engine.types import TokenKind
from specchat.store.attachment_records import Attachment
from specchat.ui import palette as palettes
from specchat.ui.chat.attaching import PendingAttachments
from specchat.ui.chat.composer_attachments import AttachButton, AttachmentChips, FileDrops
from specchat.ui.transcript.chat_view import ChatView


class Composer(QPlainTextEdit):
    """The message box: Enter sends, Shift+Enter starts a new line; files pasted or dropped
    onto it are attached rather than written in as their paths.

    Attributes:
        attachments: where pasted and dropped files go (None: pasted as text).

    Signals:
        submitted(): Enter was pressed.
    """

    submitted = Signal()
    attachments: PendingAttachments | None = None

    def canInsertFromMimeData(self, source: QMimeData) -> bool:
        if self.attachments is not None and self.attachments.accepts(source):
            return True
        return super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:
        if self.attachments is not None and self.attachments.accepts(source):
            self.attachments.add_mime(source)
            return
        super().insertFromMimeData(source)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        enter = event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
        if enter and not event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            self.submitted.emit()
            return
        super().keyPressEvent(event)


class Banner(QFrame):
    """A dismissable line above the transcript for errors and notices.

    Attributes:
        label: the message.
        kind: 'error' or 'info'.
        action_button: what the message offers to do, shown only when it offers something.
    """

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("banner")
        self.kind = "info"
        layout = QHBoxLayout(self)
        layout.setContentsMargins(10, 6, 6, 6)
        self.label = QLabel("")
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        close = QToolButton()
        close.setText("✕")
        close.setAutoRaise(True)
        close.setToolTip("Dismiss")
        close.clicked.connect(self.hide)
        #: Offers what to do about the message ("Regenerate with temperature 0.7"), if anything.
        self.action_button = QPushButton("")
        self.action_button.hide()
        self.action_button.clicked.connect(self._on_action_clicked)
        self._action: Callable[[], object] | None = None
        layout.addWidget(self.label, 1)
        layout.addWidget(self.action_button, 0, Qt.AlignmentFlag.AlignTop)
        layout.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)
        self.hide()

    def _on_action_clicked(self) -> None:
        action, self._action = self._action, None
        self.hide()
        if action is not None:
            action()

    def show_message(
        self,
        text: str,
        *,
        kind: str,
        palette: palettes.Palette,
        action: tuple[str, Callable[[], object]] | None = None,
    ) -> None:
        self.kind = kind
        self._action = action[1] if action else None
        self.action_button.setText(action[0] if action else "")
        self.action_button.setVisible(action is not None)
        background = palette.error_background if kind == "error" else palette.info_background
        foreground = palette.error_text if kind == "error" else palette.text
        self.setStyleSheet(
            f"#banner {{ background: {background.name()}; border-radius: 4px; }}"
            f"#banner QLabel {{ color: {foreground.name()}; }}"
        )
        self.label.setText(text)
        self.show()


def legend_html(palette: palettes.Palette) -> str:
    parts = []
    for kind, label, style in (
        (TokenKind.ACCEPTED, "accepted draft", ""),
        (TokenKind.CORRECTED, "corrected", "text-decoration: underline;"),
        (TokenKind.BONUS, "bonus", ""),
    ):
        background = palette.token_background[kind]
        colour = background.name() if background is not None else "transparent"
        parts.append(
            f'<span style="background-color: {colour}; {style}">&nbsp;{label}&nbsp;</span>'
        )
    parts.append("plain: no tint")
    return "&nbsp;&nbsp;".join(parts)


def set_checked_quietly(widget: QAction | QCheckBox, on: bool) -> None:
    """Check or uncheck without emitting toggled (two controls mirror one option)."""
    widget.blockSignals(True)
    widget.setChecked(on)
    widget.blockSignals(False)


class ChatPane(QWidget):
    """The banner, the transcript, the legend row with its toggles, and the composer row.

    Attributes:
        banner: errors and notices above the transcript.
        chat_view: the transcript.
        legend: what the token tints mean.
        colour_check, ghost_check: token colours and rejected drafts on or off.
        think_check: the model thinks before it answers (shown where its template has the
            switch).
        attachments: the files attached to the message being written.
        chips: those files shown above the composer, each removable.
        attach_button: the paperclip beside the composer.
        composer: the message box.
        send_button, stop_button: send the message, stop the answer.
    """

    def __init__(
        self,
        *,
        palette: palettes.Palette,
        colouring: bool,
        show_rejected: bool,
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self._palette = palette
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        self.banner = Banner()
        layout.addWidget(self.banner)
        self.chat_view = ChatView(palette=palette, colouring=colouring, show_rejected=show_rejected)
        layout.addWidget(self.chat_view, 1)
        legend_row = QHBoxLayout()
        self.legend = QLabel(legend_html(palette))
        self.legend.setObjectName("legend")
        self.legend.setToolTip(
            "\n".join(
                f"{k.name.lower()}: {palettes.TOKEN_MEANINGS[k]} ({palettes.TOKEN_CUES[k]})"
                for k in TokenKind
            )
        )
        self.colour_check = QCheckBox("Colours")
        self.colour_check.setChecked(colouring)
        self.ghost_check = QCheckBox("Rejected drafts")
        self.ghost_check.setToolTip("Show rejected draft tokens as struck-through ghost text")
        self.ghost_check.setChecked(show_rejected)
        self.think_check = QCheckBox("Think")
        self.think_check.setToolTip(
            "Let the model think before it answers (Ctrl+T); its thinking is shown folded "
            "above the answer"
        )
        self.think_check.setVisible(False)
        legend_row.addWidget(self.legend, 1)
        legend_row.addWidget(self.think_check)
        legend_row.addWidget(self.colour_check)
        legend_row.addWidget(self.ghost_check)
        layout.addLayout(legend_row)

        self.attachments = PendingAttachments(self)
        self.attachments.refused.connect(self._on_attachment_refused)
        self.chips = AttachmentChips(self.attachments, palette=palette)
        layout.addWidget(self.chips)
        composer_row = QHBoxLayout()
        self.attach_button = AttachButton(self.attachments, palette=palette)
        composer_row.addWidget(self.attach_button, 0, Qt.AlignmentFlag.AlignTop)
        self.composer = Composer()
        self.composer.attachments = self.attachments
        self.composer.setObjectName("composer")
        self.composer.setPlaceholderText(
            "Ask something — Enter sends, Shift+Enter adds a line, Esc stops"
        )
        self.composer.setFixedHeight(72)
        buttons = QVBoxLayout()
        self.send_button = QPushButton("Send")
        self.send_button.setDefault(True)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setEnabled(False)
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.stop_button)
        composer_row.addWidget(self.composer, 1)
        composer_row.addLayout(buttons)
        layout.addLayout(composer_row)

    def accept_file_drops(self, window: QWidget) -> None:
        """Files dropped anywhere on `window` are attached to the message being written."""
        self._drops = FileDrops(window, self.attachments)

    def give_back(self, text: str, attachments: Sequence[Attachment]) -> None:
        """A message that was not sent goes back to the composer, its files to the chips."""
        self.composer.setPlainText(text)
        self.attachments.restore(attachments)

    def _on_attachment_refused(self, message: str) -> None:
        self.banner.show_message(message, kind="error", palette=self._palette)

    def set_palette(self, palette: palettes.Palette) -> None:
        """Recolour the transcript, the legend, the chips and a visible banner."""
        self._palette = palette
        self.chips.set_palette(palette)
        self.attach_button.set_palette(palette)
        self.chat_view.set_palette(palette)
        self.legend.setText(legend_html(palette))
        if self.banner.isVisible():
            self.banner.show_message(
                self.banner.label.text(), kind=self.banner.kind, palette=palette
            )

    def set_colouring(self, on: bool) -> None:
        """Token colours on or off, in the transcript, the legend and the check box."""
        set_checked_quietly(self.colour_check, on)
        self.chat_view.set_colouring(on)
        self.legend.setEnabled(on)

    def set_show_rejected(self, on: bool) -> None:
        """Rejected drafts shown as ghost text or not."""
        set_checked_quietly(self.ghost_check, on)
        self.chat_view.set_show_rejected(on)
