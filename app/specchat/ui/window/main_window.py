"""The main window: conversations, the live transcript, the composer and the side panel."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QEvent, Qt, QTimer, Signal, Slot
from PySide6.QtGui import (
    QCloseEvent,
    QGuiApplication,
)
from PySide6.QtWidgets import (
    QMainWindow,
    QSplitter,
)

from specchat import settings as cfg
from specchat.assembly.api_service import ApiService
from specchat.engine.drafting.registry import AUTO
from specchat.engine.types import Controls, StopReason
from specchat.settings import Settings
from specchat.store.conversations import ConversationStore, StoreError
from specchat.ui import palette as palettes
from specchat.ui.chat.answer import (
    AnswerController,
    AnswerDone,
    AnswerEnded,
    AnswerRound,
    AnswerStarted,
    acceptance_totals,
)
from specchat.ui.chat.answer_notices import AnswerNotices
from specchat.ui.chat.chat_pane import ChatPane
from specchat.ui.chat.regenerate_hint import offer_warmer
from specchat.ui.pairs.pair_loader import PairLoader, catalog_pair, local_pair, pair_text
from specchat.ui.panels.api_panel import ApiPanel, with_api_section
from specchat.ui.panels.controls import GpuLayers
from specchat.ui.panels.conversation_list import ConversationList
from specchat.ui.panels.side_panel import SidePanel
from specchat.ui.panels.status_line import StatusLine, answer_status
from specchat.ui.window.export import ask_export_path, write_export
from specchat.ui.window.latency import LatencyProbe
from specchat.ui.window.view_options import ViewOptions
from specchat.ui.window.window_menus import WindowMenus
from specchat.ui.window.window_state import decode, encode, overflow_policy, save_controls
from specchat.workers.generation import (
    Failure,
    Loaded,
    LoadProgressUpdate,
    LoadRequest,
)
from specchat.workers.generation_service import GenerationService

if TYPE_CHECKING:
    from specchat.host.keeper import ChatKeeper

log = logging.getLogger(__name__)


class MainWindow(QMainWindow):
    """SpecChat's window.

    Attributes:
        settings: persisted settings.
        store: the conversation store.
        service: the generation worker and its thread.
        chat_pane, side_panel, conversation_list, status_line, menus: the parts.
        banner, chat_view, composer: the chat pane's parts most of the window drives.
        controls, stats_panel: the side panel's two halves.
        view: the view switches (token colours, rejected drafts, panels, theme).
        latency: the event-loop latency probe (runs while an answer streams).

    Signals:
        model_loaded(Loaded): a pair finished loading.
        answer_done(AnswerDone): an answer ended (finished, stopped or failed) and was stored.
        error_shown(str): an error message appeared in the window.
    """

    model_loaded = Signal(Loaded)
    answer_done = Signal(AnswerDone)
    error_shown = Signal(str)

    def __init__(
        self,
        *,
        settings: Settings,
        store: ConversationStore,
        autoload: bool = True,
        n_threads: int | None = None,
    ) -> None:
        super().__init__()
        self.settings = settings
        self.store = store
        self.setWindowTitle("SpecChat")
        self._conversation_id: int | None = None
        self._closing = False

        self.service = GenerationService(n_threads=n_threads, store=store, parent=self)
        self.answers = AnswerController(service=self.service, store=store, parent=self)
        self.loader = PairLoader(service=self.service, settings=settings, parent=self)
        self.latency = LatencyProbe(self)
        self._build()
        self._build_menus()
        self._connect()
        self._restore()
        self.service.start()
        self._save_timer = QTimer(self)
        self._save_timer.setSingleShot(True)
        self._save_timer.setInterval(400)
        self._save_timer.timeout.connect(self._on_save_due)
        if autoload:
            QTimer.singleShot(0, self.load_from_settings)

    # --- construction --------------------------------------------------------------------
    def _build(self) -> None:
        s = self.settings
        palette = palettes.current()
        self.conversation_list = ConversationList(self.store)
        self.conversation_list.setMinimumWidth(160)

        self.chat_pane = ChatPane(
            palette=palette,
            colouring=s.get(cfg.COLOUR_TOKENS),
            show_rejected=s.get(cfg.SHOW_REJECTED),
        )
        pane = self.chat_pane
        self.banner = pane.banner
        self.chat_view = pane.chat_view
        self.composer = pane.composer
        pane.accept_file_drops(self)

        self.side_panel = SidePanel(settings=s, palette=palette)
        self.controls = self.side_panel.controls
        self.stats_panel = self.side_panel.stats_panel

        self.api = ApiService(self.service, keeper=self._api_keeper)
        self.api_panel = ApiPanel(self.api, settings=s)
        # A kept API chat (settings) shows in the list when its answer ends.
        self.api.events.ended.connect(lambda _ended: self.conversation_list.refresh())
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(with_api_section(self.conversation_list, self.api_panel))
        self.splitter.addWidget(self.chat_pane)
        self.splitter.addWidget(self.side_panel)
        self.splitter.setStretchFactor(0, 0)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setStretchFactor(2, 0)
        self.splitter.setSizes([190, 640, 320])
        self.setCentralWidget(self.splitter)

        self.status_line = StatusLine(self.statusBar())
        self.notices = AnswerNotices(
            answers=self.answers,
            banner=self.banner,
            status_line=self.status_line,
            chat_view=self.chat_view,
            palette=lambda: self.palette_,
            parent=self,
        )
        self.resize(1180, 760)

    def _build_menus(self) -> None:
        self.menus = WindowMenus(self.menuBar(), theme=self.settings.get(cfg.THEME), parent=self)
        self.view = ViewOptions(
            settings=self.settings,
            menus=self.menus,
            chat_pane=self.chat_pane,
            side_panel=self.side_panel,
            conversation_list=self.conversation_list,
            palette=self.chat_view.palette_,
            parent=self,
        )
        m = self.menus
        m.new_requested.connect(self.new_conversation)
        m.export_requested.connect(self._export)
        m.quit_requested.connect(self.close)
        m.copy_requested.connect(self._on_copy_requested)
        m.send_requested.connect(self._on_send_clicked)
        m.stop_requested.connect(self._on_stop_clicked)
        m.regenerate_requested.connect(self.regenerate)
        m.models_requested.connect(self._on_models_requested)
        m.reload_requested.connect(self._on_reload_requested)

    def _connect(self) -> None:
        self.loader.started.connect(self._on_load_started)
        self.loader.progress.connect(self._on_load_progress)
        self.loader.finished.connect(self._on_loaded)
        self.loader.failed.connect(self._on_load_failed)
        self.answers.started.connect(self._on_answer_started)
        self.answers.round_shown.connect(self._on_round_shown)
        self.answers.ended.connect(self._on_answer_ended)
        self.composer.submitted.connect(self._on_send_clicked)
        self.chat_pane.send_button.clicked.connect(self._on_send_clicked)
        self.chat_pane.stop_button.clicked.connect(self._on_stop_clicked)
        self.status_line.cancel_load_button.clicked.connect(self._on_cancel_load_clicked)
        self.controls.controls_changed.connect(self._on_controls_changed)
        self.controls.gpu_layers_changed.connect(self._on_gpu_layers_changed)
        self.controls.context_changed.connect(self._on_gpu_layers_changed)
        self.controls.models_requested.connect(self._on_models_requested)
        self.controls.reload_requested.connect(self._on_reload_requested)
        self.controls.advanced_toggled.connect(self._on_advanced_toggled)
        self.conversation_list.selected.connect(self._on_conversation_selected)
        self.conversation_list.new_requested.connect(self._on_new_requested)
        self.conversation_list.deleted.connect(self._on_conversation_deleted)
        self.conversation_list.failed.connect(self._show_error)

    def _restore(self) -> None:
        s = self.settings
        self.view.restore()
        # Geometry last: hiding a panel of a window not yet shown would shrink it again.
        geometry = s.get(cfg.WINDOW_GEOMETRY)
        if geometry:
            self.restoreGeometry(decode(geometry))
        state = s.get(cfg.WINDOW_STATE)
        if state:
            self.splitter.restoreState(decode(state))
        last = s.get(cfg.LAST_CONVERSATION)
        if last and last in self.conversation_list.ids():
            self.open_conversation(last)
        self._refresh_actions()

    # --- models ----------------------------------------------------------------------------
    def load_from_settings(self) -> None:
        """Load the pair the settings name (the catalog's default on a first start)."""
        self._request_load(**self.loader.from_settings())

    def load_pair(self, pair_id: str) -> None:
        """Load a catalog pair (its files are found by the worker, off this thread)."""
        self._request_load(**catalog_pair(pair_id))

    def load_files(self, target: Path, draft: Path | None, *, label: str = "") -> None:
        """Load a pair from files on disk."""
        self._request_load(**local_pair(target, draft, label=label))

    def _request_load(self, **what: Any) -> None:
        self.answers.end_locally(StopReason.CANCELLED, note="stopped: switching models")
        gpu = self.controls.gpu_layers()
        self.settings.set(cfg.N_CTX, self.controls.memory.n_ctx())  # the loader reads them
        self.settings.set(cfg.KV_CACHE, self.controls.memory.kv_cache())
        self.settings.set(cfg.RPC_SERVERS, self.controls.memory.rpc_servers())
        self.loader.load(target_gpu_layers=gpu.target, draft_gpu_layers=gpu.draft, **what)

    @Slot(LoadRequest)
    def _on_load_started(self, request: LoadRequest) -> None:
        self.answers.pair_label = ""
        self.controls.set_pair(f"Loading {request.label}…")
        self.status_line.show_loading(request.label)
        self._refresh_actions()

    @Slot(LoadProgressUpdate)
    def _on_load_progress(self, update: LoadProgressUpdate) -> None:
        self.status_line.show_progress(update.stage, update.overall)

    @Slot(Loaded)
    def _on_loaded(self, loaded: Loaded) -> None:
        self.answers.pair_label = loaded.label
        self.status_line.hide_loading()
        self.controls.set_pair(*pair_text(loaded))
        self.controls.set_available_modes(loaded.info.drafters)
        info = loaded.info
        self.controls.set_memory_use(
            n_ctx=info.target.n_ctx,
            kv_bytes_per_token=info.kv_bytes_per_token,
            key_type=info.target.key_type,
            state_bytes=info.state_bytes,
            near_ties=info.target.near_ties,
        )
        self.view.offer_thinking(info.thinking_switch)
        self.status_line.say(f"{loaded.label} ready.")
        if self.banner.kind == "error":
            self.banner.hide()
        self._refresh_actions()
        self.model_loaded.emit(loaded)

    @Slot(Failure)
    def _on_load_failed(self, failure: Failure) -> None:
        self.status_line.hide_loading()
        kept = self.loader.loaded  # the pair in use before: a failed load never unloads it
        self.answers.pair_label = kept.label if kept else ""
        self.controls.set_pair(*pair_text(kept))
        if failure.cancelled:
            self.status_line.say("Loading cancelled.")
        else:
            self.status_line.say("The model could not be loaded.")
            self._show_error(failure.message)
        self._refresh_actions()

    @Slot()
    def _on_cancel_load_clicked(self) -> None:
        self.loader.cancel()

    @Slot()
    def _on_models_requested(self) -> None:
        # Imported on demand: the picker pulls in the download worker.
        from specchat.ui.pairs.model_picker import ModelPicker

        picker = ModelPicker(self)
        picker.pair_chosen.connect(self._on_pair_chosen)
        picker.exec()

    @Slot(object)
    def _on_pair_chosen(self, choice: object) -> None:
        """The picker chose a catalog pair (its id) or local files (with target/draft)."""
        what = self.loader.choose(choice)
        if what is not None:
            self._request_load(**what)

    @Slot()
    def _on_reload_requested(self) -> None:
        self._request_load(**self.loader.reload())

    def _reload_here(self) -> None:
        """The pair again with its target on this machine alone (the RPC servers cleared)."""
        self.controls.memory.set_rpc_servers("")
        self._on_reload_requested()

    # --- conversations -------------------------------------------------------------------
    def new_conversation(self) -> None:
        """Ctrl+N: an empty transcript; the conversation is created with the first message."""
        self.stop()
        self._conversation_id = None
        self.banner.hide()
        self.chat_view.clear_messages()
        self.stats_panel.set_conversation_totals(0, 0)
        self.stats_panel.begin_answer()
        self.conversation_list.list.clearSelection()
        self.conversation_list.list.setCurrentRow(-1)
        self.composer.setFocus()
        self._refresh_actions()

    def open_conversation(self, conversation_id: int) -> None:
        if self.answers.active:
            self.stop()
        self._conversation_id = conversation_id
        self.banner.hide()
        messages = self.store.messages(conversation_id)
        self.chat_view.show_messages(messages)
        self.stats_panel.set_conversation_totals(*acceptance_totals(messages))
        self.stats_panel.begin_answer()
        self.conversation_list.refresh(select=conversation_id)
        self.settings.set(cfg.LAST_CONVERSATION, conversation_id)
        self._refresh_actions()

    @Slot(int)
    def _on_conversation_selected(self, conversation_id: int) -> None:
        if conversation_id != self._conversation_id:
            self.open_conversation(conversation_id)

    @Slot()
    def _on_new_requested(self) -> None:
        self.new_conversation()

    @Slot(int)
    def _on_conversation_deleted(self, conversation_id: int) -> None:
        if conversation_id == self._conversation_id:
            self.new_conversation()

    # --- answering -------------------------------------------------------------------------
    @property
    def generating(self) -> bool:
        return self.answers.active

    def send(self, text: str | None = None) -> bool:
        """Send the composer's text (or `text`); returns whether an answer started."""
        message = (self.composer.toPlainText() if text is None else text).strip()
        attached = self.chat_pane.attachments.items
        if not (message or attached) or self.answers.active:
            return False
        if self.loader.loaded is None:
            self._show_error(
                "No model is loaded yet."
                if not self.loader.loading
                else "The model is still loading; send again when it is ready."
            )
            return False
        try:  # the composer keeps the text until it is saved: a refused write loses nothing
            if self._conversation_id is None:
                title = (message or attached[0].name).splitlines()[0][:48].strip() or "New chat"
                conversation = self.store.create(title)
                self._conversation_id = conversation.id
                self.settings.set(cfg.LAST_CONVERSATION, conversation.id)
                self.conversation_list.refresh(select=conversation.id)
            self.store.add_message(self._conversation_id, "user", message, attachments=attached)
        except StoreError as failure:
            self._show_error(f"Your message was not sent, it could not be saved: {failure}.")
            return False
        self.chat_view.add_user(message, attached)
        self.composer.clear()
        self.chat_pane.attachments.clear()
        return self._start_answer(give_back=True)

    def regenerate(self) -> bool:
        """Ctrl+R: replace the last answer with a new one."""
        if self._conversation_id is None or self.loader.loaded is None:
            return False
        if self.answers.active:
            self.stop()
        messages = self.store.messages(self._conversation_id)
        if not messages:
            return False
        if messages[-1].role == "assistant":
            try:
                self.store.delete_message(messages[-1].id)
            except StoreError as failure:
                self._show_error(f"The answer was kept, it could not be replaced: {failure}.")
                return False
            self.chat_view.remove_last_answer()
            self._recount_conversation()
        if not any(m.role == "user" for m in self.store.messages(self._conversation_id)):
            return False
        if not self._start_answer():
            return False
        offer_warmer(self)
        return True

    def stop(self) -> None:
        """Esc: stop the answer now; what was written so far is kept (marked unfinished)."""
        self.answers.stop()

    def _start_answer(self, *, give_back: bool = False) -> bool:
        assert self._conversation_id is not None
        try:
            self.answers.start(
                self._conversation_id,
                controls=self.controls.state(),
                max_tokens=max(1, self.settings.get(cfg.MAX_TOKENS)),
                policy=overflow_policy(self.settings),
                give_back=give_back,
                thinking=self.view.thinking(),
            )
        except StoreError as failure:  # the question is kept in the transcript: Ctrl+R retries
            self._show_error(f"No answer was started, it could not be saved: {failure}.")
            return False
        return True

    @Slot(AnswerStarted)
    def _on_answer_started(self, _started: AnswerStarted) -> None:
        self.chat_view.begin_answer()
        self.stats_panel.begin_answer()
        self.latency.start()
        self.status_line.say("Answering…")
        self._refresh_actions()

    @Slot(AnswerRound)
    def _on_round_shown(self, shown: AnswerRound) -> None:
        result = shown.result
        self.chat_view.append_round(result, shown.thinking)
        self.stats_panel.show_round(result, shown.speed, auto=shown.auto, kept=shown.kept)
        if shown.auto and result.events:
            self.controls.show_policy_k(result.choice.k, result.choice.reason)

    @Slot(AnswerEnded)
    def _on_answer_ended(self, ended: AnswerEnded) -> None:
        if ended.error and self.controls.memory.rpc_servers() and "RPC server" in ended.error:
            # A server the target spread over was lost: reload here alone, or (the user's
            # choice) wait for it and Reload as it is.
            self.banner.show_message(
                ended.error,
                kind="error",
                palette=self.palette_,
                action=("Reload here", self._reload_here),
            )
            self.error_shown.emit(ended.error)
        elif ended.error:
            self._show_error(ended.error)
        self.latency.stop()
        if ended.gave_back:
            self.chat_view.remove_last_exchange()
            self.chat_pane.give_back(ended.returned, ended.returned_attachments)
        else:
            self.chat_view.end_answer(note=ended.note)
        if ended.stats is not None:
            if ended.speed is not None:
                self.stats_panel.show_stats(ended.stats, ended.speed)
            self.stats_panel.end_answer(ended.stats)
        worst = self.latency.worst_ms
        self.status_line.latency_label.setText(f"UI latency ≤ {worst:.0f} ms")
        status = answer_status(ended.stop, ended.stats)
        self.status_line.say("Message not sent." if ended.gave_back else status)
        self.conversation_list.refresh(select=ended.conversation_id)
        self._refresh_actions()
        done = AnswerDone(ended.conversation_id, ended.message_id, ended.stop, ended.stats, worst)
        self.answer_done.emit(done)

    def _recount_conversation(self) -> None:
        conversation_id = self._conversation_id
        messages = self.store.messages(conversation_id) if conversation_id is not None else []
        self.stats_panel.set_conversation_totals(*acceptance_totals(messages))

    # --- controls ----------------------------------------------------------------------------
    @Slot(Controls)
    def _on_controls_changed(self, state: Controls) -> None:
        # Sent at once: the worker applies it from the next round of the current answer.
        self.service.update_controls(state)
        self.answers.set_auto(state.mode == AUTO)
        self.stats_panel.show_auto(state.mode == AUTO)
        self._save_timer.start()

    @Slot(object)
    def _on_gpu_layers_changed(self, _layers: GpuLayers | int) -> None:
        # GPU layers or the context size: both apply at the next load (Reload).
        self._save_timer.start()

    @Slot(bool)
    def _on_advanced_toggled(self, _open: bool) -> None:
        self._save_timer.start()

    @Slot()
    def _on_save_due(self) -> None:
        self.save_settings()

    @property
    def palette_(self) -> palettes.Palette:
        """The colours in use."""
        return self.view.palette

    def changeEvent(self, event: QEvent) -> None:
        # The system may have switched light/dark: recolour what SpecChat paints itself.
        if event.type() == QEvent.Type.ApplicationPaletteChange and hasattr(self, "view"):
            self.view.follow_application_palette()
        super().changeEvent(event)

    # --- buttons --------------------------------------------------------------------------
    @Slot()
    def _on_send_clicked(self) -> None:
        self.send()

    @Slot()
    def _on_stop_clicked(self) -> None:
        self.stop()

    def _refresh_actions(self) -> None:
        busy = self.answers.active
        ready = self.loader.loaded is not None
        self.chat_pane.send_button.setEnabled(ready and not busy)
        self.menus.send_action.setEnabled(ready and not busy)
        self.chat_pane.stop_button.setEnabled(busy)
        self.menus.stop_action.setEnabled(busy)
        self.menus.regenerate_action.setEnabled(ready and self._conversation_id is not None)

    def _show_error(self, message: str) -> None:
        self.banner.show_message(message, kind="error", palette=self.palette_)
        self.error_shown.emit(message)

    # --- copy and export -------------------------------------------------------------------
    @Slot(bool)
    def _on_copy_requested(self, markdown: bool) -> None:
        self._copy_answer(markdown=markdown)

    def _copy_answer(self, *, markdown: bool) -> None:
        text = self.chat_view.answer_markdown() if markdown else self.chat_view.answer_plain_text()
        if text:
            QGuiApplication.clipboard().setText(text)
            self.status_line.say("Answer copied.")

    def _export(self, kind: str) -> None:
        if self._conversation_id is None:
            self.status_line.say("Nothing to export yet.")
            return
        title = self.store.get(self._conversation_id).title
        path = ask_export_path(self, title, kind=kind)
        if path is not None:
            self.export_conversation(path, kind=kind)

    def export_conversation(self, path: Path, *, kind: str) -> None:
        assert self._conversation_id is not None
        error = write_export(self.store, self._conversation_id, path, kind=kind)
        if error:
            self._show_error(error)
            return
        self.status_line.say(f"Exported to {path}.")

    # --- persistence and shutdown -------------------------------------------------------
    def save_settings(self) -> None:
        s = self.settings
        save_controls(s, self.controls)
        s.set(cfg.WINDOW_GEOMETRY, encode(self.saveGeometry()))
        s.set(cfg.WINDOW_STATE, encode(self.splitter.saveState()))

    def _api_keeper(self) -> ChatKeeper | None:
        """Where API chats are written while the user keeps them (settings), else None."""
        if not self.settings.get(cfg.REMEMBER_API_CHATS):
            return None
        from specchat.host.keeper import ChatKeeper

        return ChatKeeper(self.store)

    def closeEvent(self, event: QCloseEvent) -> None:
        if not self._closing:
            self._closing = True
            if self.answers.active:
                # Keep what was written, marked unfinished; the worker is told to stop below.
                self.service.worker.cancel_generation()
                self.answers.end_locally(StopReason.CANCELLED, note="stopped")
            self._save_timer.stop()
            self.save_settings()
            self.api.stop()
            self.service.shutdown(timeout_s=2.0)
        super().closeEvent(event)
