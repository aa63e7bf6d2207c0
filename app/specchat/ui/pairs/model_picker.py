"""The model picker: catalog pairs with their state on disk, downloads, and local GGUF pairs."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QMessageBox,
    QPushButton,
    QSplitter,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from specchat import settings as cfg
from specchat.assembly.quality_bench import QualityBench
from specchat.models.catalog import Catalog, CatalogError, load_catalog
from specchat.models.compat import damaged_file
from specchat.models.transfer import FreeSpace, format_bytes
from specchat.ui import palette
from specchat.ui.pairs.pair_details import BAR_MAX, PairDetails, describe_progress
from specchat.ui.pairs.pair_downloads import (
    Downloads,
    ask_keep_partial,
    checksum_summary,
    describe_status,
    progress_status,
)
from specchat.ui.pairs.pair_list import LOCAL_PREFIX, PairList, local_key, pair_size
from specchat.ui.pairs.pair_memory import RememberedPair, custom_pairs, remember_custom
from specchat.ui.pairs.pair_targets import TargetChooser
from specchat.workers.download_payloads import (
    FetchCancelled,
    FetchFailed,
    FetchRequest,
    FileProgress,
    LocalChecked,
    LocalCheckRequest,
    PairFetched,
    PairStatus,
)
from specchat.workers.download_worker import DownloadService
from specchat.workers.optimise_worker import (
    OptimiseEnded,
    OptimiseProgress,
    OptimiseService,
    TargetChoices,
)

__all__ = ["BAR_MAX", "LocalPair", "ModelPicker", "describe_progress"]

log = logging.getLogger(__name__)


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


class ModelPicker(QDialog):
    """Choose, download or add the target/draft pair the window loads.

    Nothing here blocks: the catalog's state on disk, compatibility verdicts, downloads and
    checks of local files all run on a DownloadService thread and come back as signals.
    The list (ui/pairs/pair_list.py), the detail column (ui/pairs/pair_details.py) and the download
    bookkeeping (ui/pairs/pair_downloads.py) are parts; this dialog wires them to the worker.

    Attributes:
        catalog: the pairs listed (shipped and user catalog).
        service: the download worker's thread and its signals.
        tree: the list of pairs.
        details: the selected pair's detail column: its title, file labels, bars, checksum,
            message and download buttons.
        downloads: what is being fetched, what failed, the checksum results.
        statuses: the latest PairStatus of each catalog pair id.

    Signals:
        pair_chosen(object): the user chose a pair: its catalog id (str) or a LocalPair.
    """

    pair_chosen = Signal(object)  # str | LocalPair: a signal declares one type

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
        self.resize(1280, 640)
        self._settings = settings if settings is not None else getattr(parent, "settings", None)
        loader = getattr(parent, "loader", None)  # the window's PairLoader, when opened there
        #: Whether the window has no pair in use (a finished download is then loaded).
        self._nothing_loaded = (
            (lambda: loader.loaded is None and not loader.loading) if loader else (lambda: False)
        )
        self._palette = palette.current()
        self.statuses: dict[str, PairStatus] = {}
        self._locals: dict[str, LocalChecked] = {}
        self.downloads = Downloads()
        #: Whether the next passing local check selects its row (not for the restored one).
        self._select_new_local = True
        #: The pair whose target is being converted, if any.
        self._optimising: str | None = None

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
        # "Optimise for this CPU" and the target files live on their own thread, so a
        # conversion never waits behind a download or a survey (and the reverse).
        self.optimiser = OptimiseService(
            quality=QualityBench(),
            cache_dir=cache_dir,
            models_dir=models_dir,
            free_space=free_space,
            parent=self,
        )
        self._build()
        self._wire()
        current = self._settings.get(cfg.PAIR_ID) if self._settings is not None else None
        self.tree.fill(self.catalog, current=current)
        self._refresh_details()
        self.service.start()
        self.optimiser.start()
        self.service.survey()
        self._survey_targets()
        if load_error:
            self._show_message(load_error, error=True)
        self._restore_custom()

    # --- construction ------------------------------------------------------------------------
    def _build(self) -> None:
        self.tree = PairList()
        self.details = PairDetails(pal=self._palette)
        self.targets = TargetChooser(pal=self._palette)
        self.targets.hide()
        column = self.details.layout()
        assert isinstance(column, QVBoxLayout)
        # Below the download buttons, above the stretch and the message banner.
        column.insertWidget(column.count() - 2, self.targets)

        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.setChildrenCollapsible(False)
        splitter.addWidget(self.tree)
        splitter.addWidget(self.details)
        splitter.setStretchFactor(0, 1)
        splitter.setStretchFactor(1, 1)
        # Pair names are long ("Qwen2.5-Coder 1.5B + 0.5B Instruct (Q4_K_M)") and share the
        # list with the models, drafter, size and status columns: room for them.
        splitter.setSizes([700, 580])

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
        self.details.download_button.clicked.connect(self._on_download_clicked)
        self.details.cancel_button.clicked.connect(self._on_cancel_clicked)
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
        self.targets.chosen.connect(self._on_target_chosen)
        self.targets.optimise_clicked.connect(self._on_optimise_clicked)
        self.targets.cancel_clicked.connect(self._on_optimise_cancel_clicked)
        self.optimiser.surveyed.connect(self._on_targets_surveyed)
        self.optimiser.progress.connect(self._on_optimise_progress)
        self.optimiser.ended.connect(self._on_optimise_ended)

    def _restore_custom(self) -> None:
        """List every local pair the settings remember, checked like a newly added one."""
        s = self._settings
        if s is None:
            return
        in_use = s.get(cfg.CUSTOM_TARGET) if s.get(cfg.PAIR_ID) == "custom" else ""
        for pair in custom_pairs(s):
            if pair.target is not None and pair.files_present():
                self._select_new_local = str(pair.target) == in_use
                self.service.check_local(LocalCheckRequest(pair.target, pair.draft))

    # --- public API (also what tests drive) ----------------------------------------------------
    def selected_key(self) -> str | None:
        return self.tree.selected_key()

    def select(self, key: str) -> None:
        self.tree.select(key)

    def status_text(self, key: str) -> str:
        return self.tree.status_text(key)

    def start_download(self, pair_id: str | None = None) -> None:
        """Fetch a pair (default: the selected one); one fetch at a time."""
        pair_id = pair_id or self.selected_key()
        if pair_id is None or pair_id.startswith(LOCAL_PREFIX):
            return
        if self.downloads.fetching is not None:
            return
        self.downloads.begin(pair_id)
        self._hide_message()
        self.tree.set_status(pair_id, "starting…")
        self.service.fetch(FetchRequest(pair_id))
        self._refresh_details()

    def cancel_download(self, *, keep_partial: bool = True) -> None:
        """Stop the fetch; its partial files stay for a resume unless `keep_partial` is False."""
        if self.downloads.fetching is None:
            return
        self.downloads.discard_after_cancel = not keep_partial
        self.service.cancel()
        self.tree.set_status(self.downloads.fetching, "cancelling…")
        self.details.cancel_button.setEnabled(False)

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
        if key.startswith(LOCAL_PREFIX):
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

    def start_optimise(self, pair_id: str | None = None) -> None:
        """Convert a pair's target into Q4_0 (default: the selected pair); one at a time."""
        pair_id = pair_id or self.selected_key()
        if pair_id is None or pair_id.startswith(LOCAL_PREFIX) or self.optimiser.busy:
            return
        self._optimising = pair_id
        self._hide_message()
        self.targets.set_busy(True)
        self.optimiser.optimise(pair_id)

    def _survey_targets(self) -> None:
        key = self.selected_key()
        if key is None or key.startswith(LOCAL_PREFIX):
            self.targets.hide()
            return
        # Hidden until this pair's survey arrives: the previous pair's files must never be
        # shown under this one (the survey waits behind file checks on the worker).
        if self.targets.shown_pair() != key:
            self.targets.hide()
        self.optimiser.survey(key)

    # --- slots: user actions -------------------------------------------------------------------
    @Slot(QTreeWidgetItem, QTreeWidgetItem)
    def _on_current_changed(self, *_items: object) -> None:
        self._refresh_details()
        self._survey_targets()

    @Slot(str)
    def _on_target_chosen(self, variant: str) -> None:
        if self._settings is not None:
            self._settings.set(cfg.TARGET_FILE, variant)

    @Slot()
    def _on_optimise_clicked(self) -> None:
        self.start_optimise()

    @Slot()
    def _on_optimise_cancel_clicked(self) -> None:
        self.optimiser.cancel()
        self.targets.cancel_button.setEnabled(False)

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
        pair_id = self.downloads.fetching
        if pair_id is None:
            return
        # Paused while the question is open: stopped now with the partial kept, so the
        # answer decides about bytes that are really there (never a file that completed).
        self.downloads.asking = True
        self.cancel_download(keep_partial=True)
        action = self.downloads.after_question(ask_keep_partial(self))
        paused, self.downloads.paused = self.downloads.paused, None
        if action == "finished":
            self._show_message("The download had already finished; nothing was cancelled.")
        elif action == "resume":
            self.start_download(pair_id)
        elif action == "discard" and paused is not None:
            self._discard(paused)
        elif action == "kept" and paused is not None:
            self._say_kept(paused)

    @Slot()
    def _on_add_local_clicked(self) -> None:
        start = str(Path.home())
        target, _ = QFileDialog.getOpenFileName(
            self, "Choose the target model", start, "GGUF models (*.gguf);;All files (*)"
        )
        if not target:
            return
        # Refuse a file that is no usable model before asking anything more about it.
        problem = damaged_file(Path(target), None)
        if problem:
            self._show_message(f"Refused: {problem}", error=True)
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

    # --- slots: the workers ------------------------------------------------------------------
    @Slot(TargetChoices)
    def _on_targets_surveyed(self, choices: TargetChoices) -> None:
        if choices.pair_id != self.selected_key():
            return
        current = self._settings.get(cfg.TARGET_FILE) if self._settings is not None else "target"
        busy = self.optimiser.busy
        self.targets.show_choices(choices, current=current, busy=busy)
        self.targets.set_busy(busy and self._optimising == choices.pair_id)

    @Slot(OptimiseProgress)
    def _on_optimise_progress(self, event: OptimiseProgress) -> None:
        if event.pair_id == self.selected_key():
            self.targets.show_progress(event)

    @Slot(OptimiseEnded)
    def _on_optimise_ended(self, ended: OptimiseEnded) -> None:
        self._optimising = None
        self.targets.set_busy(False)
        text = ended.message
        if ended.ok:
            text += " Choose it under Target file to run it."
        self._show_message(text, error=not ended.ok and not ended.cancelled)

    @Slot(PairStatus)
    def _on_surveyed(self, status: PairStatus) -> None:
        self.statuses[status.pair_id] = status
        if status.pair_id != self.downloads.fetching:
            failed = status.pair_id in self.downloads.failed
            self.tree.set_status(status.pair_id, describe_status(status, failed=failed))
        if self.tree.row(status.pair_id) is not None:
            size = pair_size(status, self.catalog.get(status.pair_id))
            self.tree.set_size(status.pair_id, size)
        if status.pair_id == self.selected_key():
            self._refresh_details()

    @Slot(FileProgress)
    def _on_progress(self, event: FileProgress) -> None:
        if event.pair_id != self.downloads.fetching:
            return
        self.downloads.live[event.role] = event
        text = progress_status(event)
        if text is not None:
            self.tree.set_status(event.pair_id, text)
        if event.pair_id == self.selected_key():
            self.details.show_progress(event)

    @Slot(str)
    def _on_notice(self, text: str) -> None:
        self._show_message(text[0].upper() + text[1:] if text else text)

    @Slot(PairFetched)
    def _on_fetched(self, fetched: PairFetched) -> None:
        self.downloads.fetching = None
        if self.downloads.asking:  # it completed before the pause took hold
            self.downloads.finished_while_asking = fetched.pair_id
        self.downloads.checks[fetched.pair_id] = checksum_summary(fetched)
        self.tree.set_status(fetched.pair_id, "Ready")
        self.service.survey((fetched.pair_id,))
        self._survey_targets()
        self._refresh_details()
        if self._nothing_loaded():
            # Nothing else is in use: what was just downloaded is what the user wants.
            self._show_message(f"Downloaded; loading {self.catalog.get(fetched.pair_id).name}.")
            self.pair_chosen.emit(fetched.pair_id)

    @Slot(FetchFailed)
    def _on_failed(self, failure: FetchFailed) -> None:
        self.downloads.fetching = None
        tries = self.downloads.tries.get(failure.pair_id, 1)
        # A retry that fails the same way must still show that it ran.
        message = f"{failure.message} Attempt {tries} at {time.strftime('%H:%M:%S')}."
        self.downloads.failed[failure.pair_id] = message
        self.tree.set_status(failure.pair_id, "Failed")
        self._show_message(message, error=True)
        self.service.survey((failure.pair_id,))
        self._refresh_details()

    @Slot(FetchCancelled)
    def _on_cancelled(self, cancelled: FetchCancelled) -> None:
        d = self.downloads
        d.fetching = None
        if d.asking:  # paused for the question: its answer says what follows
            d.paused = cancelled
            self.service.survey((cancelled.pair_id,))  # the details show what is kept
        elif d.resume_after_cancel:
            d.resume_after_cancel = False
            self.start_download(cancelled.pair_id)
        elif d.discard_after_cancel:
            d.discard_after_cancel = False
            self._discard(cancelled)
        else:
            self._say_kept(cancelled)
        self._refresh_details()

    def _discard(self, cancelled: FetchCancelled) -> None:
        self.tree.set_status(cancelled.pair_id, "deleting partial…")
        self.service.discard(cancelled.pair_id)
        self._show_message("Download cancelled; deleting the partial file.")

    def _say_kept(self, cancelled: FetchCancelled) -> None:
        kept = f"; {format_bytes(cancelled.kept)} kept" if cancelled.kept else ""
        self._show_message(f"Download cancelled{kept}. Resume continues from where it stopped.")
        self.service.survey((cancelled.pair_id,))
        self._refresh_details()

    @Slot(str)
    def _on_discarded(self, pair_id: str) -> None:
        self._show_message("Download cancelled and the partial file deleted.")
        self.service.survey((pair_id,))

    @Slot(LocalChecked)
    def _on_local_checked(self, checked: LocalChecked) -> None:
        select = self._select_new_local
        if not checked.ok:
            what = checked.target.name + (f" + {checked.draft.name}" if checked.draft else "")
            self._show_message(f"Refused {what}: {checked.reason}", error=True)
            return
        self._locals[local_key(checked)] = checked
        item = self.tree.add_local(checked)
        if self._settings is not None:
            remember_custom(
                self._settings, RememberedPair(target=checked.target, draft=checked.draft)
            )
        if select:
            self.tree.setCurrentItem(item)
            self._show_message(f"Added the local pair: {checked.reason}.")
        self._refresh_details()

    # --- drawing -------------------------------------------------------------------------------
    def _show_message(self, text: str, *, error: bool = False) -> None:
        self.details.show_message(text, error=error)

    def _hide_message(self) -> None:
        self.details.hide_message()

    def _refresh_details(self) -> None:
        key = self.selected_key()
        if key is None:
            self.details.show_nothing()
            self.use_button.setEnabled(False)
            return
        if key.startswith(LOCAL_PREFIX):
            local = self._locals[key]
            self.details.show_local(local)
            self.use_button.setEnabled(local.ok)
            return
        status = self.statuses.get(key)
        fetching_this = self.downloads.fetching == key
        self.details.show_catalog_pair(
            self.catalog.get(key),
            status,
            live=self.downloads.live,
            checksum=self.downloads.checks.get(key, ""),
            failed=key in self.downloads.failed,
            fetching_this=fetching_this,
            busy=self.downloads.fetching is not None,
        )
        self.use_button.setEnabled(status is not None and status.ready and not fetching_this)
        self.use_button.setToolTip("" if self.use_button.isEnabled() else "Download it first")

    # --- closing -------------------------------------------------------------------------------
    def done(self, result: int) -> None:
        # Accept, reject, Esc and the window's close button all end here: a running fetch
        # is cancelled with its partial kept, and the thread stopped within a bound.
        self.service.shutdown(timeout_s=3.0)
        # A quality measurement stops at its next pass (one forward pass of a 48-token text).
        self.optimiser.shutdown(timeout_s=10.0)
        super().done(result)

    def closeEvent(self, event: QCloseEvent) -> None:
        self.service.shutdown(timeout_s=3.0)
        # A quality measurement stops at its next pass (one forward pass of a 48-token text).
        self.optimiser.shutdown(timeout_s=10.0)
        super().closeEvent(event)
