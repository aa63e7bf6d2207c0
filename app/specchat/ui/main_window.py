"""The main window: conversations, the live transcript, the composer and the side panel."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import QByteArray, QEvent, Qt, QTimer, Signal, Slot
from PySide6.QtGui import (
    QAction,
    QActionGroup,
    QCloseEvent,
    QGuiApplication,
    QKeyEvent,
    QKeySequence,
)
from PySide6.QtWidgets import (
    QCheckBox,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSplitter,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from specchat import settings as cfg
from specchat.engine.context import OverflowPolicy
from specchat.engine.types import Controls, DraftMode, Stats, StopReason, TokenKind
from specchat.settings import Settings
from specchat.store.conversations import ConversationStore
from specchat.ui import palette as palettes
from specchat.ui.answer import AnswerController, AnswerEnded, AnswerRound, AnswerStarted
from specchat.ui.chat_view import ChatView, spans_from_store
from specchat.ui.controls import ControlsPanel, ControlState, GpuLayers
from specchat.ui.conversations import ConversationList
from specchat.ui.gauge import StatsPanel
from specchat.ui.latency import LatencyProbe
from specchat.workers.generation import (
    Failure,
    GenerationService,
    Loaded,
    LoadProgressUpdate,
    LoadRequest,
    PromptPrepared,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AnswerDone:
    """An answer ended and was stored.

    Attributes:
        conversation_id: its conversation.
        message_id: the stored message.
        stop: why it ended.
        stats: its totals (None when it failed before any round).
        latency_worst_ms: the event-loop probe's worst lateness during the answer.
    """

    conversation_id: int
    message_id: int
    stop: StopReason | None
    stats: Stats | None
    latency_worst_ms: float


class Composer(QPlainTextEdit):
    """The message box: Enter sends, Shift+Enter starts a new line.

    Signals:
        submitted(): Enter was pressed.
    """

    submitted = Signal()

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
        layout.addWidget(self.label, 1)
        layout.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)
        self.hide()

    def show_message(self, text: str, *, kind: str, palette: palettes.Palette) -> None:
        self.kind = kind
        background = palette.error_background if kind == "error" else palette.info_background
        foreground = palette.error_text if kind == "error" else palette.text
        self.setStyleSheet(
            f"#banner {{ background: {background.name()}; border-radius: 4px; }}"
            f"#banner QLabel {{ color: {foreground.name()}; }}"
        )
        self.label.setText(text)
        self.show()


def _legend_html(palette: palettes.Palette) -> str:
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


def _b64(data: QByteArray) -> str:
    return bytes(data.toBase64().data()).decode("ascii")


def _unb64(text: str) -> QByteArray:
    return QByteArray.fromBase64(text.encode("ascii"))


class MainWindow(QMainWindow):
    """SpecChat's window.

    Attributes:
        settings: persisted settings.
        store: the conversation store.
        service: the generation worker and its thread.
        chat_view, composer, controls, stats_panel, conversation_list: the parts.
        latency: the event-loop latency probe (runs while an answer streams).

    Signals:
        model_loaded(Loaded): a pair finished loading.
        answer_done(AnswerDone): an answer ended (finished, stopped or failed) and was stored.
        error_shown(str): an error message appeared in the window.
    """

    model_loaded = Signal(object)
    answer_done = Signal(object)
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
        self.palette_ = palettes.current()
        self._conversation_id: int | None = None
        self._load_id: int | None = None
        self._last_load: LoadRequest | None = None
        self._loaded: Loaded | None = None
        self._closing = False

        self.service = GenerationService(n_threads=n_threads, parent=self)
        self.answers = AnswerController(service=self.service, store=store, parent=self)
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
        self.conversation_list = ConversationList(self.store)
        self.conversation_list.setMinimumWidth(160)

        centre = QWidget()
        centre_layout = QVBoxLayout(centre)
        centre_layout.setContentsMargins(6, 6, 6, 6)
        self.banner = Banner()
        centre_layout.addWidget(self.banner)
        self.chat_view = ChatView(
            palette=self.palette_,
            colouring=s.get(cfg.COLOUR_TOKENS),
            show_rejected=s.get(cfg.SHOW_REJECTED),
        )
        centre_layout.addWidget(self.chat_view, 1)
        legend_row = QHBoxLayout()
        self.legend = QLabel(_legend_html(self.palette_))
        self.legend.setObjectName("legend")
        self.legend.setToolTip(
            "\n".join(
                f"{k.name.lower()}: {palettes.TOKEN_MEANINGS[k]} ({palettes.TOKEN_CUES[k]})"
                for k in TokenKind
            )
        )
        self.colour_check = QCheckBox("Colours")
        self.colour_check.setChecked(s.get(cfg.COLOUR_TOKENS))
        self.ghost_check = QCheckBox("Rejected drafts")
        self.ghost_check.setToolTip("Show rejected draft tokens as struck-through ghost text")
        self.ghost_check.setChecked(s.get(cfg.SHOW_REJECTED))
        legend_row.addWidget(self.legend, 1)
        legend_row.addWidget(self.colour_check)
        legend_row.addWidget(self.ghost_check)
        centre_layout.addLayout(legend_row)

        composer_row = QHBoxLayout()
        self.composer = Composer()
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
        centre_layout.addLayout(composer_row)

        state = ControlState(
            DraftMode.parse(s.get(cfg.MODE))
            if s.get(cfg.MODE) in {m.value for m in DraftMode}
            else DraftMode.AUTO,
            s.get(cfg.K),
            min(2.0, max(0.0, s.get(cfg.TEMPERATURE))),
            min(1.0, max(0.05, s.get(cfg.TOP_P))),
        )
        self.controls = ControlsPanel(
            state=state,
            gpu=GpuLayers(s.get(cfg.TARGET_GPU_LAYERS), s.get(cfg.DRAFT_GPU_LAYERS)),
            advanced_open=s.get(cfg.ADVANCED_OPEN),
        )
        self.stats_panel = StatsPanel(palette=self.palette_)
        side = QWidget()
        side_layout = QVBoxLayout(side)
        side_layout.setContentsMargins(6, 6, 6, 6)
        side_layout.addWidget(self.controls)
        side_layout.addWidget(self.stats_panel)
        side_layout.addStretch(1)
        self.side_panel = QScrollArea()
        self.side_panel.setWidget(side)
        self.side_panel.setWidgetResizable(True)
        self.side_panel.setFrameShape(QFrame.Shape.NoFrame)
        self.side_panel.setMinimumWidth(300)
        self.side_panel.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)

        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.splitter.addWidget(self.conversation_list)
        self.splitter.addWidget(centre)
        self.splitter.addWidget(self.side_panel)
        self.splitter.setStretchFactor(0, 0)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setStretchFactor(2, 0)
        self.splitter.setSizes([190, 640, 320])
        self.setCentralWidget(self.splitter)

        bar = self.statusBar()
        self.status_label = QLabel("")
        self.load_bar = QProgressBar()
        self.load_bar.setRange(0, 1000)
        self.load_bar.setMaximumWidth(220)
        self.load_bar.setTextVisible(True)
        self.load_bar.hide()
        self.cancel_load_button = QPushButton("Cancel")
        self.cancel_load_button.hide()
        self.latency_label = QLabel("")
        self.latency_label.setToolTip("Worst event-loop delay measured during the last answer")
        bar.addWidget(self.status_label, 1)
        bar.addPermanentWidget(self.latency_label)
        bar.addPermanentWidget(self.load_bar)
        bar.addPermanentWidget(self.cancel_load_button)
        self.resize(1180, 760)

    def _build_menus(self) -> None:
        menu = self.menuBar()
        file_menu = menu.addMenu("&File")
        self.new_action = file_menu.addAction("&New chat", self.new_conversation)
        self.new_action.setShortcut(QKeySequence.StandardKey.New)
        file_menu.addSeparator()
        file_menu.addAction("Export as &Markdown…", lambda: self._export("md"))
        file_menu.addAction("Export as &JSON…", lambda: self._export("json"))
        file_menu.addSeparator()
        quit_action = file_menu.addAction("&Quit", self.close)
        quit_action.setShortcut(QKeySequence.StandardKey.Quit)

        edit = menu.addMenu("&Edit")
        edit.addAction("Copy answer as &Markdown", lambda: self._copy_answer(markdown=True))
        edit.addAction("Copy answer as &plain text", lambda: self._copy_answer(markdown=False))

        chat = menu.addMenu("&Chat")
        self.send_action = chat.addAction("&Send", self.send)
        self.stop_action = chat.addAction("S&top", self.stop)
        self.stop_action.setShortcut(QKeySequence(Qt.Key.Key_Escape))
        self.stop_action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        self.regenerate_action = chat.addAction("&Regenerate", self.regenerate)
        self.regenerate_action.setShortcut(QKeySequence("Ctrl+R"))

        view = menu.addMenu("&View")
        self.colour_action = view.addAction("&Colour tokens")
        self.colour_action.setCheckable(True)
        self.colour_action.setChecked(self.chat_view.colouring)
        self.ghost_action = view.addAction("Show &rejected drafts")
        self.ghost_action.setCheckable(True)
        self.ghost_action.setChecked(self.chat_view.show_rejected)
        view.addSeparator()
        self.list_action = view.addAction("Conversation &list")
        self.list_action.setCheckable(True)
        self.side_action = view.addAction("Side &panel")
        self.side_action.setCheckable(True)
        view.addSeparator()
        theme_menu = view.addMenu("&Theme")
        self._theme_group = QActionGroup(self)
        current = self.settings.get(cfg.THEME)
        for key, label in (("system", "Follow system"), ("light", "Light"), ("dark", "Dark")):
            action = QAction(label, self, checkable=True)
            action.setData(key)
            action.setChecked(key == current)
            self._theme_group.addAction(action)
            theme_menu.addAction(action)
        self._theme_group.triggered.connect(self._on_theme_chosen)

        models = menu.addMenu("&Models")
        models.addAction("&Models…", self._on_models_requested)
        models.addAction("&Reload pair", self._on_reload_requested)

    def _connect(self) -> None:
        svc = self.service
        svc.load_progress.connect(self._on_load_progress)
        svc.loaded.connect(self._on_loaded)
        svc.failed.connect(self._on_failed)
        self.answers.started.connect(self._on_answer_started)
        self.answers.prepared.connect(self._on_prepared)
        self.answers.round_shown.connect(self._on_round_shown)
        self.answers.ended.connect(self._on_answer_ended)
        self.composer.submitted.connect(self._on_send_clicked)
        self.send_button.clicked.connect(self._on_send_clicked)
        self.stop_button.clicked.connect(self._on_stop_clicked)
        self.cancel_load_button.clicked.connect(self._on_cancel_load_clicked)
        self.controls.controls_changed.connect(self._on_controls_changed)
        self.controls.gpu_layers_changed.connect(self._on_gpu_layers_changed)
        self.controls.models_requested.connect(self._on_models_requested)
        self.controls.reload_requested.connect(self._on_reload_requested)
        self.controls.advanced_toggled.connect(self._on_advanced_toggled)
        self.conversation_list.selected.connect(self._on_conversation_selected)
        self.conversation_list.new_requested.connect(self._on_new_requested)
        self.conversation_list.deleted.connect(self._on_conversation_deleted)
        self.colour_action.toggled.connect(self._on_colouring_toggled)
        self.colour_check.toggled.connect(self._on_colouring_toggled)
        self.ghost_action.toggled.connect(self._on_ghosts_toggled)
        self.ghost_check.toggled.connect(self._on_ghosts_toggled)
        self.list_action.toggled.connect(self._on_list_toggled)
        self.side_action.toggled.connect(self._on_side_toggled)
        hints = QGuiApplication.styleHints()
        if hasattr(hints, "colorSchemeChanged"):
            hints.colorSchemeChanged.connect(self._on_color_scheme_changed)

    def _restore(self) -> None:
        s = self.settings
        self.list_action.setChecked(s.get(cfg.CONVERSATIONS_VISIBLE))
        self.side_action.setChecked(s.get(cfg.SIDE_PANEL_VISIBLE))
        self.conversation_list.setVisible(s.get(cfg.CONVERSATIONS_VISIBLE))
        self.side_panel.setVisible(s.get(cfg.SIDE_PANEL_VISIBLE))
        # Geometry last: hiding a panel of a window not yet shown would shrink it again.
        geometry = s.get(cfg.WINDOW_GEOMETRY)
        if geometry:
            self.restoreGeometry(_unb64(geometry))
        state = s.get(cfg.WINDOW_STATE)
        if state:
            self.splitter.restoreState(_unb64(state))
        last = s.get(cfg.LAST_CONVERSATION)
        if last and last in self.conversation_list.ids():
            self.open_conversation(last)
        self._refresh_actions()

    # --- models ----------------------------------------------------------------------------
    def load_from_settings(self) -> None:
        """Load the pair the settings name (the catalog's default on a first start)."""
        s = self.settings
        pair_id = s.get(cfg.PAIR_ID)
        if pair_id == "custom" and s.get(cfg.CUSTOM_TARGET):
            draft = s.get(cfg.CUSTOM_DRAFT)
            self.load_files(
                Path(s.get(cfg.CUSTOM_TARGET)), Path(draft) if draft else None, label="Local pair"
            )
        else:
            self.load_pair(pair_id)

    def load_pair(self, pair_id: str) -> None:
        """Load a catalog pair (its files are found by the worker, off this thread)."""
        label = pair_id
        try:
            from specchat.models.catalog import get_pair

            label = get_pair(pair_id).name
        except Exception:  # a broken catalog is reported by the worker's load
            log.debug("catalog lookup failed", exc_info=True)
        self._request_load(pair_id=pair_id, label=label)

    def load_files(self, target: Path, draft: Path | None, *, label: str = "") -> None:
        """Load a pair from files on disk."""
        self._request_load(target=target, draft=draft, label=label or target.stem)

    def _request_load(self, **what: Any) -> None:
        self.answers.end_locally(StopReason.CANCELLED, note="stopped: switching models")
        gpu = self.controls.gpu_layers()
        request = LoadRequest(
            self.service.new_id(),
            n_ctx=self.settings.get(cfg.N_CTX),
            target_gpu_layers=gpu.target,
            draft_gpu_layers=gpu.draft,
            calibrate=self.settings.get(cfg.CALIBRATE_PLAIN),
            **what,
        )
        self._load_id = request.load_id
        self._last_load = request
        self._loaded = None
        self.answers.pair_label = ""
        self.controls.set_pair(f"Loading {request.label}…")
        self.load_bar.setValue(0)
        self.load_bar.setFormat("loading %p%")
        self.load_bar.show()
        self.cancel_load_button.show()
        self.status_label.setText(f"Loading {request.label}…")
        self._refresh_actions()
        self.service.load(request)

    @Slot(object)
    def _on_load_progress(self, update: LoadProgressUpdate) -> None:
        if update.load_id != self._load_id:
            return
        self.load_bar.setValue(round(update.overall * 1000))
        self.load_bar.setFormat(f"{update.stage} %p%")

    @Slot(object)
    def _on_loaded(self, loaded: Loaded) -> None:
        if loaded.load_id != self._load_id:
            return
        self._loaded = loaded
        self.answers.pair_label = loaded.label
        self._load_id = None
        self.load_bar.hide()
        self.cancel_load_button.hide()
        info = loaded.info
        lines = [
            f"Target: {info.target.description} · {info.target.backend}"
            + (
                f" ({info.target.gpu_layers}/{info.target.n_layers} layers on GPU)"
                if info.target.gpu_layers
                else ""
            )
        ]
        if info.draft is not None:
            lines.append(f"Draft: {info.draft.description} · {info.draft.backend}")
        else:
            lines.append("No draft model: prompt lookup only")
        if loaded.baseline is not None:
            lines.append(f"Plain: {loaded.baseline.tokens_per_s:.1f} tok/s (measured)")
        self.controls.set_pair(loaded.label, "\n".join(lines))
        self.status_label.setText(f"{loaded.label} ready.")
        if self.banner.kind == "error":
            self.banner.hide()
        self._refresh_actions()
        self.model_loaded.emit(loaded)

    @Slot()
    def _on_cancel_load_clicked(self) -> None:
        self.service.worker.cancel_load()

    @Slot()
    def _on_models_requested(self) -> None:
        # Imported on demand: the picker pulls in the download worker.
        from specchat.ui.model_picker import ModelPicker

        picker = ModelPicker(self)
        picker.pair_chosen.connect(self._on_pair_chosen)
        picker.exec()

    @Slot(object)
    def _on_pair_chosen(self, choice: object) -> None:
        """The picker chose a catalog pair (its id) or local files (with target/draft)."""
        if isinstance(choice, str):
            self.settings.set(cfg.PAIR_ID, choice)
            self.load_pair(choice)
            return
        target = getattr(choice, "target", None)
        if target is None:
            return
        draft = getattr(choice, "draft", None)
        self.settings.set(cfg.PAIR_ID, "custom")
        self.settings.set(cfg.CUSTOM_TARGET, str(target))
        self.settings.set(cfg.CUSTOM_DRAFT, str(draft) if draft else "")
        self.load_files(
            Path(target),
            Path(draft) if draft else None,
            label=str(getattr(choice, "name", "") or "Local pair"),
        )

    @Slot()
    def _on_reload_requested(self) -> None:
        if self._last_load is None:
            self.load_from_settings()
            return
        last = self._last_load
        self._request_load(
            target=last.target, draft=last.draft, pair_id=last.pair_id, label=last.label
        )

    # --- conversations -------------------------------------------------------------------
    def new_conversation(self) -> None:
        """Ctrl+N: an empty transcript; the conversation is created with the first message."""
        self.stop()
        self._conversation_id = None
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
        self.chat_view.clear_messages()
        accepted = drafted = 0
        for message in self.store.messages(conversation_id):
            if message.role == "assistant":
                note = "" if message.finished else "unfinished"
                self.chat_view.add_answer(
                    spans_from_store(message.token_kinds, message.content),
                    finished=message.finished,
                    note=note,
                )
                if message.stats:
                    accepted += int(message.stats.get("accepted", 0))
                    drafted += int(message.stats.get("drafted", 0))
            elif message.role == "user":
                self.chat_view.add_user(message.content)
        self.stats_panel.set_conversation_totals(accepted, drafted)
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
        if not message or self.answers.active:
            return False
        if self._loaded is None:
            self._show_error(
                "No model is loaded yet."
                if self._load_id is None
                else "The model is still loading; send again when it is ready."
            )
            return False
        if self._conversation_id is None:
            title = message.splitlines()[0][:48].strip() or "New chat"
            conversation = self.store.create(title)
            self._conversation_id = conversation.id
            self.settings.set(cfg.LAST_CONVERSATION, conversation.id)
            self.conversation_list.refresh(select=conversation.id)
        self.store.add_message(self._conversation_id, "user", message)
        self.chat_view.add_user(message)
        self.composer.clear()
        self._start_answer()
        return True

    def regenerate(self) -> bool:
        """Ctrl+R: replace the last answer with a new one."""
        if self._conversation_id is None or self._loaded is None:
            return False
        if self.answers.active:
            self.stop()
        messages = self.store.messages(self._conversation_id)
        if not messages:
            return False
        if messages[-1].role == "assistant":
            last = messages[-1]
            self.store.delete_message(last.id)
            self.chat_view.remove_last_answer()
            self._recount_conversation()
        if not any(m.role == "user" for m in self.store.messages(self._conversation_id)):
            return False
        self._start_answer()
        return True

    def stop(self) -> None:
        """Esc: stop the answer now; what was written so far is kept (marked unfinished)."""
        self.answers.stop()

    def _start_answer(self) -> None:
        assert self._conversation_id is not None
        state = self.controls.state()
        try:
            policy = OverflowPolicy.from_setting(self.settings.get(cfg.CONTEXT_OVERFLOW))
        except ValueError:
            policy = OverflowPolicy.DROP_OLDEST
        self.answers.start(
            self._conversation_id,
            controls=Controls(state.mode, state.k, state.sampling()),
            max_tokens=max(1, self.settings.get(cfg.MAX_TOKENS)),
            policy=policy,
        )

    @Slot(AnswerStarted)
    def _on_answer_started(self, _started: AnswerStarted) -> None:
        self.chat_view.begin_answer()
        self.stats_panel.begin_answer()
        self.latency.start()
        self.status_label.setText("Answering…")
        self._refresh_actions()

    @Slot(PromptPrepared)
    def _on_prepared(self, prepared: PromptPrepared) -> None:
        if prepared.dropped:
            n = len(prepared.dropped)
            self.banner.show_message(
                f"{n} older message{'s were' if n != 1 else ' was'} left out so the conversation "
                f"fits the context window ({prepared.prompt_tokens:,} prompt tokens).",
                kind="info",
                palette=self.palette_,
            )

    @Slot(AnswerRound)
    def _on_round_shown(self, shown: AnswerRound) -> None:
        result = shown.result
        self.chat_view.append_round(result)
        self.stats_panel.show_round(result, shown.speed, auto=shown.auto)
        if shown.auto and result.events:
            self.controls.show_policy_k(result.choice.k, result.choice.reason)

    @Slot(Failure)
    def _on_failed(self, failure: Failure) -> None:
        # An answer's failure reaches the window through the answer controller.
        if failure.load_id is None or failure.load_id != self._load_id:
            return
        self._load_id = None
        self.load_bar.hide()
        self.cancel_load_button.hide()
        self.controls.set_pair("No model loaded", "")
        if failure.cancelled:
            self.status_label.setText("Loading cancelled.")
        else:
            self.status_label.setText("The model could not be loaded.")
            self._show_error(failure.message)
        self._refresh_actions()

    @Slot(AnswerEnded)
    def _on_answer_ended(self, ended: AnswerEnded) -> None:
        if ended.error:
            self._show_error(ended.error)
        self.latency.stop()
        self.chat_view.end_answer(note=ended.note)
        if ended.stats is not None:
            if ended.speed is not None:
                self.stats_panel.show_stats(ended.stats, ended.speed)
            self.stats_panel.end_answer(ended.stats)
        worst = self.latency.worst_ms
        self.latency_label.setText(f"UI latency ≤ {worst:.0f} ms")
        stats, stop = ended.stats, ended.stop
        rate = f" · {stats.tokens_per_s:.1f} tok/s" if stats and stats.rounds else ""
        self.status_label.setText(f"Answer {stop.value if stop else 'failed'}{rate}.")
        self.conversation_list.refresh(select=ended.conversation_id)
        self._refresh_actions()
        self.answer_done.emit(
            AnswerDone(ended.conversation_id, ended.message_id, stop, stats, worst)
        )

    def _recount_conversation(self) -> None:
        accepted = drafted = 0
        if self._conversation_id is not None:
            for message in self.store.messages(self._conversation_id):
                if message.stats:
                    accepted += int(message.stats.get("accepted", 0))
                    drafted += int(message.stats.get("drafted", 0))
        self.stats_panel.set_conversation_totals(accepted, drafted)

    # --- controls ----------------------------------------------------------------------------
    @Slot(object)
    def _on_controls_changed(self, state: ControlState) -> None:
        # Sent at once: the worker applies it from the next round of the current answer.
        self.service.update_controls(Controls(state.mode, state.k, state.sampling()))
        self.answers.set_auto(state.mode == DraftMode.AUTO)
        self._save_timer.start()

    @Slot(object)
    def _on_gpu_layers_changed(self, _layers: GpuLayers) -> None:
        self._save_timer.start()

    @Slot(bool)
    def _on_advanced_toggled(self, _open: bool) -> None:
        self._save_timer.start()

    @Slot()
    def _on_save_due(self) -> None:
        self.save_settings()

    @Slot(bool)
    def _on_colouring_toggled(self, on: bool) -> None:
        for widget in (self.colour_action, self.colour_check):
            widget.blockSignals(True)
            widget.setChecked(on)
            widget.blockSignals(False)
        self.chat_view.set_colouring(on)
        self.legend.setEnabled(on)
        self.settings.set(cfg.COLOUR_TOKENS, on)

    @Slot(bool)
    def _on_ghosts_toggled(self, on: bool) -> None:
        for widget in (self.ghost_action, self.ghost_check):
            widget.blockSignals(True)
            widget.setChecked(on)
            widget.blockSignals(False)
        self.chat_view.set_show_rejected(on)
        self.settings.set(cfg.SHOW_REJECTED, on)

    @Slot(bool)
    def _on_list_toggled(self, on: bool) -> None:
        self.conversation_list.setVisible(on)
        self.settings.set(cfg.CONVERSATIONS_VISIBLE, on)

    @Slot(bool)
    def _on_side_toggled(self, on: bool) -> None:
        self.side_panel.setVisible(on)
        self.settings.set(cfg.SIDE_PANEL_VISIBLE, on)

    @Slot(QAction)
    def _on_theme_chosen(self, action: QAction) -> None:
        theme = str(action.data())
        self.settings.set(cfg.THEME, theme)
        palettes.apply_theme(theme)
        self._apply_palette()

    @Slot(object)
    def _on_color_scheme_changed(self, _scheme: object) -> None:
        if self.settings.get(cfg.THEME) == "system":
            palettes.apply_theme("system")
            self._apply_palette()

    def _apply_palette(self) -> None:
        self.palette_ = palettes.current()
        self.chat_view.set_palette(self.palette_)
        self.stats_panel.set_palette(self.palette_)
        self.legend.setText(_legend_html(self.palette_))
        if self.banner.isVisible():
            self.banner.show_message(
                self.banner.label.text(), kind=self.banner.kind, palette=self.palette_
            )

    def changeEvent(self, event: QEvent) -> None:
        # The system switched light/dark: recolour what we paint ourselves.
        if (
            event.type() == QEvent.Type.ApplicationPaletteChange
            and hasattr(self, "chat_view")
            and palettes.current().dark != self.palette_.dark
        ):
            self._apply_palette()
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
        ready = self._loaded is not None
        self.send_button.setEnabled(ready and not busy)
        self.send_action.setEnabled(ready and not busy)
        self.stop_button.setEnabled(busy)
        self.stop_action.setEnabled(busy)
        self.regenerate_action.setEnabled(ready and self._conversation_id is not None)

    def _show_error(self, message: str) -> None:
        self.banner.show_message(message, kind="error", palette=self.palette_)
        self.error_shown.emit(message)

    # --- copy and export -------------------------------------------------------------------
    def _copy_answer(self, *, markdown: bool) -> None:
        text = self.chat_view.answer_markdown() if markdown else self.chat_view.answer_plain_text()
        if text:
            QGuiApplication.clipboard().setText(text)
            self.status_label.setText("Answer copied.")

    def _export(self, kind: str) -> None:
        if self._conversation_id is None:
            self.status_label.setText("Nothing to export yet.")
            return
        title = self.store.get(self._conversation_id).title
        safe = "".join(c if c.isalnum() or c in " -_" else "_" for c in title).strip() or "chat"
        suffix = ".md" if kind == "md" else ".json"
        path, _ = QFileDialog.getSaveFileName(
            self,
            "Export conversation",
            str(Path.home() / f"{safe}{suffix}"),
            "Markdown (*.md)" if kind == "md" else "JSON (*.json)",
        )
        if not path:
            return
        self.export_conversation(Path(path), kind=kind)

    def export_conversation(self, path: Path, *, kind: str) -> None:
        assert self._conversation_id is not None
        text = (
            self.store.export_markdown(self._conversation_id)
            if kind == "md"
            else self.store.export_json(self._conversation_id)
        )
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as error:
            self._show_error(f"Could not write {path}: {error.strerror or error}")
            return
        self.status_label.setText(f"Exported to {path}.")

    # --- persistence and shutdown -------------------------------------------------------
    def save_settings(self) -> None:
        s = self.settings
        state = self.controls.state()
        gpu = self.controls.gpu_layers()
        s.set(cfg.MODE, state.mode.value)
        s.set(cfg.K, state.k)
        s.set(cfg.TEMPERATURE, state.temperature)
        s.set(cfg.TOP_P, state.top_p)
        s.set(cfg.TARGET_GPU_LAYERS, gpu.target)
        s.set(cfg.DRAFT_GPU_LAYERS, gpu.draft)
        s.set(cfg.ADVANCED_OPEN, self.controls.advanced_button.isChecked())
        s.set(cfg.WINDOW_GEOMETRY, _b64(self.saveGeometry()))
        s.set(cfg.WINDOW_STATE, _b64(self.splitter.saveState()))

    def closeEvent(self, event: QCloseEvent) -> None:
        if not self._closing:
            self._closing = True
            if self.answers.active:
                # Keep what was written, marked unfinished; the worker is told to stop below.
                self.service.worker.cancel_generation()
                self.answers.end_locally(StopReason.CANCELLED, note="stopped")
            self._save_timer.stop()
            self.save_settings()
            self.service.shutdown(timeout_s=2.0)
        super().closeEvent(event)
