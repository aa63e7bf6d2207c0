"""The model picker's detail column: a pair's files, compatibility, progress and messages."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from specchat.engine.drafting.registry import mode_info
from specchat.models.catalog import UNCHECKED_ENTRY, ModelFile, ModelPair
from specchat.models.drafter_kinds import DrafterKind
from specchat.models.transfer import format_bytes
from specchat.ui import palette
from specchat.ui.pairs.pair_list import catalog_size, file_size
from specchat.workers.download_payloads import FileProgress, FileStatus, LocalChecked, PairStatus

#: Progress bars count in thousandths: smooth for gigabyte files, exact at 100 %.
BAR_MAX = 1000


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def describe_progress(event: FileProgress) -> str:
    """One line for a file's progress bar: stage, percentage, bytes, speed and time left."""
    if event.stage == "done":
        return f"{event.label}: ✓ {format_bytes(event.done)}"
    verb = {
        "download": "downloading",
        "verify": "checking sha256",
        "assemble": "assembling",
        "check": "checking",
    }.get(event.stage, event.stage)
    parts = [f"{event.label}: {verb}"]
    fraction = event.fraction
    if fraction is not None and event.total is not None:
        parts.append(
            f"{fraction * 100:.0f} % · {format_bytes(event.done)} of {format_bytes(event.total)}"
        )
    else:
        parts.append(format_bytes(event.done))
    if event.speed > 0:
        parts.append(f"{format_bytes(event.speed)}/s")
    if event.eta is not None and not event.finished and event.eta > 0:
        parts.append(f"{_duration(event.eta)} left")
    return " · ".join(parts)


def describe_file(model: ModelFile, status: FileStatus | None) -> str:
    """Repository, file, facts and state on disk of one model file (rich text)."""
    size = status.size if status is not None else catalog_size(model)
    facts = [model.params, model.quantisation, model.licence]
    facts.append(file_size(size, model))
    if status is None:
        state = "checking…"
    elif status.present:
        where = "the hub cache" if status.source == "hub" else "SpecChat's models folder"
        checked = "sha256 verified" if status.verified else "not verified"
        state = f"present in {where}, {checked}"
    elif status.partial:
        state = f"{format_bytes(status.partial)} downloaded, paused"
    else:
        state = "not downloaded"
    return (
        f"{model.repo} / {model.filename}<br><small>{' · '.join(f for f in facts if f)}"
        f" — {state}</small>"
    )


class PairDetails(QWidget):
    """What the picker shows about the selected pair, with its download buttons.

    Attributes:
        title, note: the pair's name and the catalog's note.
        file_labels: one label per role ("target", "draft").
        drafter: which drafter the pair uses and how it works.
        entry: what an unchecked catalog entry means (shown for those only).
        recommended, verdict: the suggested mode and the drafter's verdict on the files.
        bars: one progress bar per role.
        checksum: the checksum result of the last fetch.
        download_button, cancel_button: fetch (or resume, verify, retry) and cancel.
        message: the banner for errors and notices.
    """

    def __init__(self, *, pal: palette.Palette, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._palette = pal
        self.title = QLabel()
        title_font = QFont(self.title.font())
        title_font.setPointSizeF(title_font.pointSizeF() * 1.25)
        title_font.setBold(True)
        self.title.setFont(title_font)
        self.title.setWordWrap(True)
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setStyleSheet(f"color: {pal.muted_text.name()};")

        self.file_labels = {role: QLabel() for role in ("target", "draft")}
        for label in self.file_labels.values():
            label.setWordWrap(True)
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.drafter = QLabel()
        self.drafter.setWordWrap(True)
        self.entry = QLabel()
        self.entry.setWordWrap(True)
        self.entry.setObjectName("uncheckedEntry")
        self.recommended = QLabel()
        self.verdict = QLabel()
        self.verdict.setWordWrap(True)
        self._form = form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.addRow("Drafter:", self.drafter)
        form.addRow("Target:", self.file_labels["target"])
        form.addRow("Draft:", self.file_labels["draft"])
        form.addRow("Catalog entry:", self.entry)
        form.addRow("Recommended:", self.recommended)
        form.addRow("Compatibility:", self.verdict)
        form.setRowVisible(self.entry, False)

        self.bars: dict[str, QProgressBar] = {}
        bars = QVBoxLayout()
        bars.setSpacing(4)
        for role in ("target", "draft"):
            bar = QProgressBar()
            bar.setRange(0, BAR_MAX)
            bar.setTextVisible(True)
            bar.setObjectName(f"{role}Bar")
            self.bars[role] = bar
            bars.addWidget(bar)
        self.checksum = QLabel()
        self.checksum.setWordWrap(True)
        self.checksum.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.checksum.setStyleSheet(f"color: {pal.muted_text.name()};")

        self.message = QLabel()
        self.message.setWordWrap(True)
        self.message.setObjectName("pickerMessage")
        self.message.setMargin(8)
        self.message.hide()

        self.download_button = QPushButton("Download")
        self.cancel_button = QPushButton("Cancel download")
        for button in (self.download_button, self.cancel_button):
            button.setAutoDefault(False)
        actions = QHBoxLayout()
        actions.addWidget(self.download_button)
        actions.addWidget(self.cancel_button)
        actions.addStretch(1)

        column = QVBoxLayout(self)
        column.setContentsMargins(12, 0, 0, 0)
        column.addWidget(self.title)
        column.addWidget(self.note)
        line = QFrame()
        line.setFrameShape(QFrame.Shape.HLine)
        line.setFrameShadow(QFrame.Shadow.Sunken)
        column.addWidget(line)
        column.addLayout(form)
        column.addSpacing(6)
        column.addLayout(bars)
        column.addWidget(self.checksum)
        column.addLayout(actions)
        column.addStretch(1)
        column.addWidget(self.message)

    def show_nothing(self) -> None:
        """No pair is selected."""
        self.title.setText("No pair selected")
        for widget in (self.note, self.drafter, self.recommended, self.verdict, self.checksum):
            widget.setText("")
        self._form.setRowVisible(self.entry, False)
        self.download_button.setEnabled(False)
        self.cancel_button.setEnabled(False)

    def show_catalog_pair(
        self,
        pair: ModelPair,
        status: PairStatus | None,
        *,
        live: dict[str, FileProgress],
        checksum: str,
        failed: bool,
        fetching_this: bool,
        busy: bool,
    ) -> None:
        """A catalog pair: its files and their state, with `live` progress while it fetches."""
        self.title.setText(pair.name)
        self.note.setText(pair.note)
        self.note.setVisible(bool(pair.note))
        self._show_drafter(pair)
        for role, model in pair.files():
            file_status = getattr(status, role) if status is not None else None
            self.file_labels[role].setText(describe_file(model, file_status))
        try:
            mode = mode_info(pair.mode).label.lower()
        except KeyError:  # a mode whose drafter is not registered in this build
            mode = pair.mode
        self.recommended.setText(f"{mode} mode, K = {pair.k}")
        if status is None:
            self.verdict.setText("checking…")
        elif status.compatible is None:
            self.verdict.setText("checked once the pair's files are present")
        else:
            mark = "✓ compatible" if status.compatible else "✗ incompatible"
            self.verdict.setText(f"{mark}: {status.reason}")
        for role, _model in pair.files():
            event = live.get(role) if fetching_this else None
            if event is not None:
                self.show_progress(event)
            else:
                self.show_file_bar(role, getattr(status, role) if status is not None else None)
        self.checksum.setText(checksum)
        self.checksum.setVisible(bool(self.checksum.text()))
        verified = status is not None and status.ready and status.verified
        if failed:
            label = "Retry"
        elif status is not None and status.partial:
            label = "Resume download"
        elif status is not None and status.present:
            label = "Verified ✓" if verified else "Verify files"
        else:
            label = "Download"
        self.download_button.setText(label)
        self.download_button.setEnabled(not busy and not verified)
        self.cancel_button.setEnabled(fetching_this)
        self.cancel_button.setVisible(fetching_this)

    def _show_drafter(self, pair: ModelPair) -> None:
        """The drafter row, the draft row's name (and its bar, which an MTP head has none
        of), and the unchecked-entry row."""
        drafter = pair.drafter
        self.drafter.setText(f"{drafter.label} — {drafter.description}")
        draft_row = self._form.labelForField(self.file_labels["draft"])
        if isinstance(draft_row, QLabel):
            assistant = drafter is DrafterKind.ASSISTANT
            draft_row.setText("Assistant:" if assistant else "Draft:")
        if pair.draft is None:
            self.file_labels["draft"].setText("none: the target file holds its MTP head")
        self.bars["draft"].setVisible(pair.draft is not None)
        self.entry.setText(UNCHECKED_ENTRY[0].upper() + UNCHECKED_ENTRY[1:] + ".")
        self._form.setRowVisible(self.entry, not pair.checked)

    def show_local(self, local: LocalChecked) -> None:
        """A local pair: its files on disk and the check's verdict."""
        self.title.setText("Local pair")
        self.note.setText("Files on disk, not from the catalog.")
        self.note.setVisible(True)
        self.drafter.setText(
            DrafterKind.DRAFT_MODEL.label if local.draft is not None else "prompt lookup only"
        )
        draft_row = self._form.labelForField(self.file_labels["draft"])
        if isinstance(draft_row, QLabel):
            draft_row.setText("Draft:")
        self._form.setRowVisible(self.entry, False)
        self.bars["draft"].setVisible(True)
        for role, path in (("target", local.target), ("draft", local.draft)):
            if path is None:
                text = "none: prompt lookup only"
            else:
                text = f"{path.name}<br><small>{path.parent}</small>"
            self.file_labels[role].setText(text)
            bar = self.bars[role]
            bar.setValue(BAR_MAX if path is not None else 0)
            bar.setFormat("on disk" if path is not None else "—")
        self.recommended.setText("auto mode")
        self.verdict.setText(("✓ " if local.ok else "✗ ") + local.reason)
        self.checksum.setVisible(False)
        self.download_button.setText("Download")
        self.download_button.setEnabled(False)
        self.cancel_button.setVisible(False)

    def show_progress(self, event: FileProgress) -> None:
        bar = self.bars[event.role]
        fraction = event.fraction
        if event.stage == "done":
            fraction = 1.0
        if fraction is None:
            bar.setRange(0, 0)  # a busy bar: the size is not known yet
        else:
            bar.setRange(0, BAR_MAX)
            bar.setValue(round(fraction * BAR_MAX))
        bar.setFormat(describe_progress(event))

    def show_file_bar(self, role: str, status: FileStatus | None) -> None:
        bar = self.bars[role]
        bar.setRange(0, BAR_MAX)
        if status is None:
            bar.setValue(0)
            bar.setFormat("checking…")
        elif status.present:
            bar.setValue(BAR_MAX)
            bar.setFormat(f"{status.filename}: ✓ on disk")
        elif status.partial and status.size:
            bar.setValue(round(min(1.0, status.partial / status.size) * BAR_MAX))
            bar.setFormat(
                f"{status.filename}: paused at %p % · {format_bytes(status.partial)} "
                f"of {format_bytes(status.size)}"
            )
        elif status.partial:
            bar.setValue(0)
            bar.setFormat(f"{status.filename}: paused, {format_bytes(status.partial)} kept")
        else:
            bar.setValue(0)
            bar.setFormat(f"{status.filename}: not downloaded")

    def show_message(self, text: str, *, error: bool = False) -> None:
        pal = self._palette
        background = pal.error_background if error else pal.info_background
        foreground = pal.error_text if error else pal.text
        self.message.setStyleSheet(
            f"QLabel#pickerMessage {{ background: {background.name()}; "
            f"color: {foreground.name()}; border-radius: 4px; }}"
        )
        self.message.setText(text)
        self.message.setProperty("error", error)
        self.message.show()

    def hide_message(self) -> None:
        self.message.hide()
        self.message.setText("")
