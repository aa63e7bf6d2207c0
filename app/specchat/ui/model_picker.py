"""The model picker: catalog pairs with their state on disk, downloads, and local GGUF pairs."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtGui import QCloseEvent, QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QFileDialog,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from specchat import settings as cfg
from specchat.models.catalog import Catalog, CatalogError, ModelFile, ModelPair, load_catalog
from specchat.models.transfer import FreeSpace, format_bytes
from specchat.ui import palette
from specchat.workers.download import (
    DownloadService,
    FetchCancelled,
    FetchFailed,
    FetchRequest,
    FileProgress,
    FileStatus,
    LocalChecked,
    LocalCheckRequest,
    PairFetched,
    PairStatus,
)

log = logging.getLogger(__name__)

#: Progress bars count in thousandths: smooth for gigabyte files, exact at 100 %.
BAR_MAX = 1000
_ROLE_KEY = Qt.ItemDataRole.UserRole
_LOCAL_PREFIX = "local:"
_COLUMNS = ("Pair", "Models", "Size", "Status")
_SIZE, _STATUS = 2, 3
#: Shown for a size neither the catalog nor (yet) the hub has named.
_UNKNOWN_SIZE = "—"


@dataclass(frozen=True)
class LocalPair:
    """A custom pair made from files on disk (what `pair_chosen` carries for one).

    Attributes:
        name: what the window calls it.
        target: the target GGUF.
        draft: the draft GGUF, or None (prompt lookup only).
    """

    name: str
    target: Path
    draft: Path | None


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


def _pair_size(status: PairStatus | None, pair: ModelPair) -> str:
    sizes = (
        [status.target.size, status.draft.size]
        if status is not None
        else [_catalog_size(pair.target), _catalog_size(pair.draft)]
    )
    if any(size is None for size in sizes):
        return _UNKNOWN_SIZE
    return format_bytes(sum(size for size in sizes if size is not None))


def _catalog_size(model: ModelFile) -> int | None:
    if model.size is not None:
        return model.size
    return model.mirror.size if model.mirror is not None else None


class ModelPicker(QDialog):
    """Choose, download or add the target/draft pair the window loads.

    Nothing here blocks: the catalog's state on disk, compatibility verdicts, downloads and
    checks of local files all run on a DownloadService thread and come back as signals.

    Attributes:
        catalog: the pairs listed (shipped and user catalog).
        service: the download worker's thread and its signals.
        tree: the list of pairs.
        bars: one progress bar per role ("target", "draft").
        message: the banner for errors and notices.
        statuses: the latest PairStatus of each catalog pair id.

    Signals:
        pair_chosen(object): the user chose a pair: its catalog id (str) or a LocalPair.
    """

    pair_chosen = Signal(object)

    def __init__(
        self,
        parent: QWidget | None = None,
        *,
        catalog: Catalog | None = None,
        settings: cfg.Settings | None = None,
        cache_dir: Path | None = None,
        models_dir: Path | None = None,
        free_space: FreeSpace | None = None,
        endpoint: str | None = None,
        ask_hub_sizes: bool = True,
    ) -> None:
        super().__init__(parent)
        self.setWindowTitle("Models")
        self.setObjectName("modelPicker")
        self.resize(1200, 540)
        self._settings = settings if settings is not None else getattr(parent, "settings", None)
        self._palette = palette.current()
        self.statuses: dict[str, PairStatus] = {}
        self._locals: dict[str, LocalChecked] = {}
        self._fetching: str | None = None
        self._failed: dict[str, str] = {}
        self._checks: dict[str, str] = {}
        self._discard_after_cancel = False
        self._live: dict[str, FileProgress] = {}
        #: Whether the next passing local check selects its row (not for the restored one).
        self._select_new_local = True

        load_error = ""
        try:
            self.catalog = catalog if catalog is not None else load_catalog()
        except CatalogError as error:
            self.catalog = Catalog(())
            load_error = f"The model catalog cannot be read: {error}"

        self.service = DownloadService(
            catalog=self.catalog,
            cache_dir=cache_dir,
            models_dir=models_dir,
            free_space=free_space,
            endpoint=endpoint,
            ask_hub_sizes=ask_hub_sizes,
            parent=self,
        )
        self._build()
        self._wire()
        self._fill()
        self.service.start()
        self.service.survey()
        if load_error:
            self._show_message(load_error, error=True)
        self._restore_custom()

    # --- construction ------------------------------------------------------------------------
    def _build(self) -> None:
        pal = self._palette
        self.tree = QTreeWidget()
        self.tree.setColumnCount(len(_COLUMNS))
        self.tree.setHeaderLabels(list(_COLUMNS))
        self.tree.setRootIsDecorated(False)
        self.tree.setUniformRowHeights(True)
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        header = self.tree.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for index in range(1, len(_COLUMNS)):
            header.setSectionResizeMode(index, QHeaderView.ResizeMode.ResizeToContents)
        # Room around each row; a layout rule only, the palette keeps every colour.
        self.tree.setStyleSheet("QTreeWidget::item { padding: 3px 2px; }")
        self.tree.setMinimumWidth(520)

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
        self.recommended = QLabel()
        self.verdict = QLabel()
        self.verdict.setWordWrap(True)
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.addRow("Target:", self.file_labels["target"])
        form.addRow("Draft:", self.file_labels["draft"])
        form.addRow("Recommended:", self.recommended)
        form.addRow("Compatibility:", self.verdict)

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

        details = QWidget()
        column = QVBoxLayout(details)
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

        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.setChildrenCollapsible(False)
        splitter.addWidget(self.tree)
        splitter.addWidget(details)
        splitter.setStretchFactor(0, 1)
        splitter.setStretchFactor(1, 1)
        # Pair names are long ("Qwen2.5-Coder 1.5B + 0.5B Instruct (Q4_K_M)"): room for them.
        splitter.setSizes([610, 590])

        self.add_local_button = QPushButton("Add local GGUF…")
        self.close_button = QPushButton("Close")
        self.use_button = QPushButton("Use this pair")
        self.add_local_button.setAutoDefault(False)
        self.close_button.setAutoDefault(False)
        # Enter anywhere in the dialog uses the selected pair.
        self.use_button.setDefault(True)
        bottom = QHBoxLayout()
        bottom.addWidget(self.add_local_button)
        bottom.addStretch(1)
        bottom.addWidget(self.close_button)
        bottom.addWidget(self.use_button)

        layout = QVBoxLayout(self)
        layout.addWidget(splitter, 1)
        layout.addLayout(bottom)

    def _wire(self) -> None:
        self.tree.currentItemChanged.connect(self._on_current_changed)
        self.tree.itemDoubleClicked.connect(self._on_item_double_clicked)
        self.download_button.clicked.connect(self._on_download_clicked)
        self.cancel_button.clicked.connect(self._on_cancel_clicked)
        self.add_local_button.clicked.connect(self._on_add_local_clicked)
        self.close_button.clicked.connect(self.reject)
        self.use_button.clicked.connect(self._on_use_clicked)
        service = self.service
        service.surveyed.connect(self._on_surveyed)
        service.progress.connect(self._on_progress)
        service.notice.connect(self._on_notice)
        service.finished.connect(self._on_fetched)
        service.failed.connect(self._on_failed)
        service.cancelled.connect(self._on_cancelled)
        service.discarded.connect(self._on_discarded)
        service.local_checked.connect(self._on_local_checked)

    def _fill(self) -> None:
        current = self._settings.get(cfg.PAIR_ID) if self._settings is not None else None
        chosen: QTreeWidgetItem | None = None
        for pair in self.catalog:
            models = f"{pair.target.params or '?'} + {pair.draft.params or '?'}"
            item = QTreeWidgetItem([pair.name, models, _pair_size(None, pair), "checking…"])
            item.setData(0, _ROLE_KEY, pair.id)
            item.setToolTip(0, pair.note or pair.name)
            item.setToolTip(_SIZE, "target + draft; “—” until the hub names a size")
            self.tree.addTopLevelItem(item)
            if pair.id == current:
                chosen = item
        if chosen is None and self.tree.topLevelItemCount():
            chosen = self.tree.topLevelItem(0)
        if chosen is not None:
            self.tree.setCurrentItem(chosen)
        self._refresh_details()

    def _restore_custom(self) -> None:
        """List the custom pair the settings remember, checked like a newly added one."""
        s = self._settings
        if s is None or not s.get(cfg.CUSTOM_TARGET):
            return
        target = Path(s.get(cfg.CUSTOM_TARGET))
        draft_text = s.get(cfg.CUSTOM_DRAFT)
        draft = Path(draft_text) if draft_text else None
        if target.is_file() and (draft is None or draft.is_file()):
            self._select_new_local = s.get(cfg.PAIR_ID) == "custom"
            self.service.check_local(LocalCheckRequest(target, draft))

    # --- public API (also what tests drive) ----------------------------------------------------
    def selected_key(self) -> str | None:
        item = self.tree.currentItem()
        return None if item is None else str(item.data(0, _ROLE_KEY))

    def select(self, key: str) -> None:
        item = self._item(key)
        if item is not None:
            self.tree.setCurrentItem(item)

    def status_text(self, key: str) -> str:
        item = self._item(key)
        return "" if item is None else item.text(_STATUS)

    def start_download(self, pair_id: str | None = None) -> None:
        """Fetch a pair (default: the selected one); one fetch at a time."""
        pair_id = pair_id or self.selected_key()
        if pair_id is None or pair_id.startswith(_LOCAL_PREFIX) or self._fetching is not None:
            return
        self._fetching = pair_id
        self._failed.pop(pair_id, None)
        self._checks.pop(pair_id, None)
        self._live = {}
        self._discard_after_cancel = False
        self._hide_message()
        self._set_status(pair_id, "starting…")
        self.service.fetch(FetchRequest(pair_id))
        self._refresh_details()

    def cancel_download(self, *, keep_partial: bool = True) -> None:
        """Stop the fetch; its partial files stay for a resume unless `keep_partial` is False."""
        if self._fetching is None:
            return
        self._discard_after_cancel = not keep_partial
        self.service.cancel()
        self._set_status(self._fetching, "cancelling…")
        self.cancel_button.setEnabled(False)

    def add_local(self, target: Path, draft: Path | None) -> None:
        """Check files from disk as a custom pair; it is listed only if the check passes."""
        self._select_new_local = True
        self._show_message(f"Checking {target.name}" + (f" with {draft.name}…" if draft else "…"))
        self.service.check_local(LocalCheckRequest(Path(target), Path(draft) if draft else None))

    def use_selected(self) -> bool:
        """Emit `pair_chosen` for the selected pair if it can be used; True if it was."""
        key = self.selected_key()
        if key is None:
            return False
        if key.startswith(_LOCAL_PREFIX):
            local = self._locals[key]
            if not local.ok:
                return False
            name = local.target.stem + (f" + {local.draft.stem}" if local.draft else "")
            self.pair_chosen.emit(LocalPair(name, local.target, local.draft))
            return True
        status = self.statuses.get(key)
        if status is None or not status.ready:
            return False
        self.pair_chosen.emit(key)
        return True

    # --- slots: user actions -------------------------------------------------------------------
    @Slot(QTreeWidgetItem, QTreeWidgetItem)
    def _on_current_changed(self, *_items: object) -> None:
        self._refresh_details()

    @Slot(QTreeWidgetItem, int)
    def _on_item_double_clicked(self, *_args: object) -> None:
        self._on_use_clicked()

    @Slot()
    def _on_use_clicked(self) -> None:
        if self.use_selected():
            self.accept()

    @Slot()
    def _on_download_clicked(self) -> None:
        self.start_download()

    @Slot()
    def _on_cancel_clicked(self) -> None:
        if self._fetching is None:
            return
        box = QMessageBox(self)
        box.setIcon(QMessageBox.Icon.Question)
        box.setWindowTitle("Cancel download")
        box.setText("Keep what has been downloaded so far?")
        box.setInformativeText(
            "Kept, the download resumes where it stopped the next time you start it. "
            "Deleted, it starts over."
        )
        keep = box.addButton("Keep for resume", QMessageBox.ButtonRole.AcceptRole)
        delete = box.addButton("Delete partial file", QMessageBox.ButtonRole.DestructiveRole)
        go_on = box.addButton("Continue downloading", QMessageBox.ButtonRole.RejectRole)
        box.setDefaultButton(keep)
        box.setEscapeButton(go_on)
        box.exec()
        clicked = box.clickedButton()
        if clicked is keep:
            self.cancel_download(keep_partial=True)
        elif clicked is delete:
            confirm = QMessageBox.question(
                self,
                "Delete partial file",
                "Delete the partial download? It cannot be resumed afterwards.",
                QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
                QMessageBox.StandardButton.No,
            )
            self.cancel_download(keep_partial=confirm != QMessageBox.StandardButton.Yes)

    @Slot()
    def _on_add_local_clicked(self) -> None:
        start = str(Path.home())
        target, _ = QFileDialog.getOpenFileName(
            self, "Choose the target model", start, "GGUF models (*.gguf);;All files (*)"
        )
        if not target:
            return
        answer = QMessageBox.question(
            self,
            "Draft model",
            "Add a draft model that shares the target's vocabulary?\n\n"
            "Without one, SpecChat drafts by prompt lookup only.",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            QMessageBox.StandardButton.Yes,
        )
        draft: str | None = None
        if answer == QMessageBox.StandardButton.Yes:
            draft, _ = QFileDialog.getOpenFileName(
                self,
                "Choose the draft model",
                str(Path(target).parent),
                "GGUF models (*.gguf);;All files (*)",
            )
        self.add_local(Path(target), Path(draft) if draft else None)

    # --- slots: the worker -------------------------------------------------------------------
    @Slot(object)
    def _on_surveyed(self, status: PairStatus) -> None:
        self.statuses[status.pair_id] = status
        if status.pair_id != self._fetching:
            self._set_status(status.pair_id, self._describe_status(status))
        item = self._item(status.pair_id)
        if item is not None:
            item.setText(_SIZE, _pair_size(status, self.catalog.get(status.pair_id)))
        if status.pair_id == self.selected_key():
            self._refresh_details()

    @Slot(object)
    def _on_progress(self, event: FileProgress) -> None:
        if event.pair_id != self._fetching:
            return
        self._live[event.role] = event
        role_pct = event.fraction
        if event.stage == "download" and role_pct is not None:
            self._set_status(event.pair_id, f"downloading {event.role} {role_pct * 100:.0f} %")
        elif event.stage == "verify":
            self._set_status(event.pair_id, f"checking {event.role}")
        if event.pair_id == self.selected_key():
            self._show_progress(event)

    @Slot(str)
    def _on_notice(self, text: str) -> None:
        self._show_message(text[0].upper() + text[1:] if text else text)

    @Slot(object)
    def _on_fetched(self, fetched: PairFetched) -> None:
        self._fetching = None
        lines = []
        for check in fetched.checks:
            if check.sha256:
                lines.append(f"{check.role}: sha256 {check.sha256[:16]}… ✓ matches")
            else:
                lines.append(f"{check.role}: no reference sha256 to check against")
        self._checks[fetched.pair_id] = "Checksums — " + "; ".join(lines)
        self._set_status(fetched.pair_id, "Ready")
        self.service.survey((fetched.pair_id,))
        self._refresh_details()

    @Slot(object)
    def _on_failed(self, failure: FetchFailed) -> None:
        self._fetching = None
        self._failed[failure.pair_id] = failure.message
        self._set_status(failure.pair_id, "Failed")
        self._show_message(failure.message, error=True)
        self.service.survey((failure.pair_id,))
        self._refresh_details()

    @Slot(object)
    def _on_cancelled(self, cancelled: FetchCancelled) -> None:
        self._fetching = None
        if self._discard_after_cancel:
            self._discard_after_cancel = False
            self._set_status(cancelled.pair_id, "deleting partial…")
            self.service.discard(cancelled.pair_id)
            self._show_message("Download cancelled; deleting the partial file.")
        else:
            kept = f"; {format_bytes(cancelled.kept)} kept" if cancelled.kept else ""
            self._show_message(f"Download cancelled{kept}. Resume continues from where it stopped.")
            self.service.survey((cancelled.pair_id,))
        self._refresh_details()

    @Slot(str)
    def _on_discarded(self, pair_id: str) -> None:
        self._show_message("Download cancelled and the partial file deleted.")
        self.service.survey((pair_id,))

    @Slot(object)
    def _on_local_checked(self, checked: LocalChecked) -> None:
        select = self._select_new_local
        if not checked.ok:
            what = checked.target.name + (f" + {checked.draft.name}" if checked.draft else "")
            self._show_message(f"Refused {what}: {checked.reason}", error=True)
            return
        key = f"{_LOCAL_PREFIX}{checked.target}|{checked.draft or ''}"
        self._locals[key] = checked
        item = self._item(key)
        if item is None:
            name = checked.target.stem + (f" + {checked.draft.stem}" if checked.draft else "")
            size = checked.target.stat().st_size + (
                checked.draft.stat().st_size if checked.draft else 0
            )
            models = "target + draft" if checked.draft else "target only"
            item = QTreeWidgetItem([f"Local: {name}", models, format_bytes(size), "Ready"])
            item.setData(0, _ROLE_KEY, key)
            item.setToolTip(0, str(checked.target))
            self.tree.addTopLevelItem(item)
        if select:
            self.tree.setCurrentItem(item)
            self._show_message(f"Added the local pair: {checked.reason}.")
        self._refresh_details()

    # --- drawing -------------------------------------------------------------------------------
    def _item(self, key: str) -> QTreeWidgetItem | None:
        for index in range(self.tree.topLevelItemCount()):
            item = self.tree.topLevelItem(index)
            if item is not None and item.data(0, _ROLE_KEY) == key:
                return item
        return None

    def _set_status(self, key: str, text: str) -> None:
        item = self._item(key)
        if item is not None:
            item.setText(_STATUS, text)

    def _describe_status(self, status: PairStatus) -> str:
        if status.pair_id in self._failed and not status.ready:
            return "Failed"
        if status.target.present and status.draft.present:
            if status.compatible is False:
                return "Incompatible"
            verified = status.target.verified and status.draft.verified
            return "Ready ✓" if verified else "Ready"
        if status.partial:
            sizes = [f.size for f in (status.target, status.draft) if not f.present]
            known = [size for size in sizes if size is not None]
            total = sum(known)
            if len(known) == len(sizes) and total > 0:
                return f"Paused at {status.partial / total * 100:.0f} %"
            return f"Paused ({format_bytes(status.partial)} kept)"
        present = [f.role for f in (status.target, status.draft) if f.present]
        if present:
            return f"{present[0].capitalize()} present"
        return "Not downloaded"

    def _show_message(self, text: str, *, error: bool = False) -> None:
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

    def _hide_message(self) -> None:
        self.message.hide()
        self.message.setText("")

    def _refresh_details(self) -> None:
        key = self.selected_key()
        busy = self._fetching is not None
        if key is None:
            self.title.setText("No pair selected")
            for widget in (self.note, self.recommended, self.verdict, self.checksum):
                widget.setText("")
            self.download_button.setEnabled(False)
            self.cancel_button.setEnabled(False)
            self.use_button.setEnabled(False)
            return
        if key.startswith(_LOCAL_PREFIX):
            self._refresh_local(self._locals[key])
            return
        pair = self.catalog.get(key)
        status = self.statuses.get(key)
        self.title.setText(pair.name)
        self.note.setText(pair.note)
        self.note.setVisible(bool(pair.note))
        for role, model in pair.files():
            file_status = getattr(status, role) if status is not None else None
            self.file_labels[role].setText(self._describe_file(model, file_status))
        mode = {"draft": "draft model", "lookup": "prompt lookup"}.get(pair.mode, pair.mode)
        self.recommended.setText(f"{mode} mode, K = {pair.k}")
        if status is None:
            self.verdict.setText("checking…")
        elif status.compatible is None:
            self.verdict.setText("checked once both files are present")
        else:
            mark = "✓ compatible" if status.compatible else "✗ incompatible"
            self.verdict.setText(f"{mark}: {status.reason}")
        fetching_this = self._fetching == key
        for role in ("target", "draft"):
            live = self._live.get(role) if fetching_this else None
            if live is not None:
                self._show_progress(live)
            else:
                self._show_file_bar(role, getattr(status, role) if status is not None else None)
        self.checksum.setText(self._checks.get(key, ""))
        self.checksum.setVisible(bool(self.checksum.text()))
        verified = (
            status is not None and status.ready and status.target.verified and status.draft.verified
        )
        if key in self._failed:
            label = "Retry"
        elif status is not None and status.partial:
            label = "Resume download"
        elif status is not None and status.target.present and status.draft.present:
            label = "Verified ✓" if verified else "Verify files"
        else:
            label = "Download"
        self.download_button.setText(label)
        self.download_button.setEnabled(not busy and not verified)
        self.cancel_button.setEnabled(fetching_this)
        self.cancel_button.setVisible(fetching_this)
        self.use_button.setEnabled(status is not None and status.ready and not fetching_this)
        self.use_button.setToolTip("" if self.use_button.isEnabled() else "Download it first")

    def _refresh_local(self, local: LocalChecked) -> None:
        self.title.setText("Local pair")
        self.note.setText("Files on disk, not from the catalog.")
        self.note.setVisible(True)
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
        self.use_button.setEnabled(local.ok)

    def _describe_file(self, model: ModelFile, status: FileStatus | None) -> str:
        size = status.size if status is not None else _catalog_size(model)
        facts = [model.params, model.quantisation, model.licence]
        facts.append(format_bytes(size) if size is not None else "size unknown")
        if status is None:
            state = "checking…"
        elif status.present:
            where = "the hub cache" if status.source == "hub" else "SpecChat's models folder"
            state = f"present in {where}" + (", sha256 verified" if status.verified else "")
        elif status.partial:
            state = f"{format_bytes(status.partial)} downloaded, paused"
        else:
            state = "not downloaded"
        return (
            f"{model.repo} / {model.filename}<br><small>{' · '.join(f for f in facts if f)}"
            f" — {state}</small>"
        )

    def _show_progress(self, event: FileProgress) -> None:
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

    def _show_file_bar(self, role: str, status: FileStatus | None) -> None:
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

    # --- closing -------------------------------------------------------------------------------
    def done(self, result: int) -> None:
        # Accept, reject, Esc and the window's close button all end here: a running fetch
        # is cancelled with its partial kept, and the thread stopped within a bound.
        self.service.shutdown(timeout_s=3.0)
        super().done(result)

    def closeEvent(self, event: QCloseEvent) -> None:
        self.service.shutdown(timeout_s=3.0)
        super().closeEvent(event)
