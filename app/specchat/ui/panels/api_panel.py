"""The "API" section under the conversation list: the "Serve API" switch, its address and
queue, and each API request as it streams, coloured like a chat (read-only)."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QCheckBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from specchat import settings as cfg
from specchat.assembly.api_service import ApiService
from specchat.host.events import ApiEnded, ApiQueue, ApiRound, ApiStarted
from specchat.settings import Settings
from specchat.ui.panels.gauge import AcceptanceGauge
from specchat.ui.transcript.chat_view import ChatView

#: What the address line says while the server is off.
OFF = "Off: editors cannot reach SpecChat"
#: The share of the column the section takes while serving (the list keeps the rest).
SERVING_SHARE = 0.6


class ApiPanel(QWidget):
    """The switch and what the server is doing; drives an ApiService.

    The address, port and key come from the settings (api.host, api.port, api.key), read
    each time the switch is turned on. While off, the section is its title row and one
    line; serving, it shows the queue, the gauge, the requests and their transcript.

    Attributes:
        api: the service the switch starts and stops.
        settings: where the address, port and key are read.
        switch: "Serve API" (off at start).
        address: where the server listens, or why it does not.
        queue: requests waiting and whether one is answered.
        count: requests answered so far.
        requests: one read-only item per request (item data: its job number).
        view: the requests' questions and answers, tokens coloured by how they were made.
        gauge: the streaming request's acceptance (arc) and every request's so far (marker).
        details: everything below the address line (hidden while off).

    Signals:
        serving(bool): the server started (True) or stopped (False).
        refused(str): the switch was turned on but the server cannot start (why).
    """

    serving = Signal(bool)
    refused = Signal(str)

    def __init__(self, api: ApiService, *, settings: Settings, parent: QWidget | None = None):
        super().__init__(parent)
        self.api = api
        self.settings = settings
        self.switch = QCheckBox("Serve API")
        self.switch.setToolTip(
            'An OpenAI-compatible API for editors (see the README, "Use it from your '
            'editor"), answered by the loaded pair; address, port and key in Settings'
        )
        self.address = QLabel(OFF)
        self.address.setWordWrap(True)
        self.address.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.queue = QLabel("")
        self.count = QLabel("")
        self.requests = QListWidget()
        self.requests.setObjectName("api-requests")
        # A request's line is its question's start; the whole question is its tooltip.
        self.requests.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.requests.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.view = ChatView()
        self.view.setObjectName("api-transcript")
        self.gauge = AcceptanceGauge(marker_caption="all")
        self.gauge.setToolTip(
            "Acceptance rate α of API requests: the share of drafted tokens the target "
            "kept.\nArc: the request streaming. Triangle: every request so far."
        )
        self._totals = (0, 0)  # accepted, drafted over every request this session
        self._answer = (0, 0)  # the same for the request streaming
        self._answered = 0
        self.details = self._details()
        self.details.setVisible(False)
        header = QHBoxLayout()
        header.addWidget(QLabel("<b>API</b>"))
        header.addStretch(1)
        header.addWidget(self.switch)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addLayout(header)
        layout.addWidget(self.address)
        layout.addWidget(self.details, 1)
        self._items: dict[int, QListWidgetItem] = {}
        self.switch.toggled.connect(self._on_switch)
        api.events.started.connect(self._on_started)
        api.events.round_ready.connect(self._on_round)
        api.events.ended.connect(self._on_ended)
        api.events.queue_changed.connect(self._on_queue)

    def _details(self) -> QWidget:
        """The queue and the gauge side by side, the requests over their transcript."""
        details = QWidget()
        self.gauge.setMinimumSize(84, 70)
        self.gauge.setMaximumSize(108, 88)
        status = QGridLayout()
        status.setContentsMargins(0, 0, 0, 0)
        status.addWidget(self.gauge, 0, 0, 2, 1)
        status.addWidget(self.queue, 0, 1)
        status.addWidget(self.count, 1, 1)
        status.setColumnStretch(1, 1)
        parts = QSplitter(Qt.Orientation.Vertical)
        parts.setChildrenCollapsible(False)
        parts.addWidget(self.requests)
        parts.addWidget(self.view)
        parts.setStretchFactor(0, 1)
        parts.setStretchFactor(1, 3)
        layout = QVBoxLayout(details)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(status)
        layout.addWidget(parts, 1)
        return details

    @Slot(bool)
    def _on_switch(self, on: bool) -> None:
        if not on:
            self.api.stop()
            self.address.setText(OFF)
            self.queue.setText("")
            self.details.setVisible(False)
            self.serving.emit(False)
            return
        settings = self.settings
        # An emptied field means the default, never "every address" (what "" binds).
        host = settings.get(cfg.API_HOST).strip() or cfg.API_HOST.default
        port = settings.get(cfg.API_PORT)
        key = settings.get(cfg.API_KEY)
        try:
            url = self.api.start(host=host, port=port, api_key=key)
        except ValueError as error:
            self._refused(str(error))
            return
        except OSError as error:
            self._refused(f"cannot listen on {host}:{port}: {error.strerror or error}")
            return
        keyed = " · key required" if key else ""
        self.address.setText(f"{url}{keyed}\nmodel: {self._model()}")
        self.queue.setText("Waiting: 0")
        self.details.setVisible(True)
        self.serving.emit(True)

    def _refused(self, reason: str) -> None:
        self.address.setText(f"Not serving: {reason}")
        self.switch.blockSignals(True)
        self.switch.setChecked(False)
        self.switch.blockSignals(False)
        self.refused.emit(reason)

    def _model(self) -> str:
        server = self.api.server
        served = getattr(server, "served", None)
        return str(getattr(served, "model_id", "?"))

    @Slot(ApiStarted)
    def _on_started(self, started: ApiStarted) -> None:
        first_line = started.question.strip().split("\n", 1)[0]
        item = QListWidgetItem(f"{started.label}: {first_line[:80]}")
        item.setToolTip(started.question[:2000])
        item.setData(Qt.ItemDataRole.UserRole, started.job_id)
        item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEditable)
        self.requests.addItem(item)
        self._items[started.job_id] = item
        self.view.add_user(started.question)
        self.view.begin_answer()
        self._answer = (0, 0)

    @Slot(ApiRound)
    def _on_round(self, update: ApiRound) -> None:
        self.view.append_round(update.result, update.thinking)
        result = update.result
        kept, drafted = self._answer
        self._answer = (kept + result.accepted, drafted + result.drafted)
        kept, drafted = self._totals
        self._totals = (kept + result.accepted, drafted + result.drafted)
        self.gauge.set_values(_rate(*self._answer), _rate(*self._totals))

    @Slot(ApiEnded)
    def _on_ended(self, ended: ApiEnded) -> None:
        self.view.end_answer(note=ended.note)
        item = self._items.pop(ended.job_id, None)
        if item is not None:
            item.setText(f"{item.text()} · {ended.note}")
            item.setToolTip(f"{item.toolTip()}\n\n{ended.note}")
        self._answered += 1
        self.count.setText(f"Answered: {self._answered}")

    @Slot(ApiQueue)
    def _on_queue(self, queue: ApiQueue) -> None:
        self.queue.setText(f"Waiting: {queue.waiting}" + (" · answering" if queue.busy else ""))


def _rate(accepted: int, drafted: int) -> float | None:
    return accepted / drafted if drafted else None


def with_api_section(conversations: QWidget, panel: ApiPanel) -> QSplitter:
    """The conversation list with the API section under it: the section takes the room it
    needs while off, and most of the column while serving (the divider moves either way)."""
    column = QSplitter(Qt.Orientation.Vertical)
    column.addWidget(conversations)
    column.addWidget(panel)
    column.setStretchFactor(0, 1)
    column.setStretchFactor(1, 0)
    column.setCollapsible(1, False)

    def share(on: bool) -> None:
        total = sum(column.sizes())
        if on:
            below = round(total * SERVING_SHARE)
        else:
            # Off or refused: the title row and the address line, however many lines the
            # reason wraps to at this width.
            layout = panel.layout()
            if layout is not None:
                layout.activate()
            wrapped = panel.heightForWidth(panel.width())
            below = wrapped if wrapped > 0 else panel.sizeHint().height()
        column.setSizes([max(0, total - below), below])

    panel.serving.connect(share)
    panel.refused.connect(lambda _reason: share(False))
    return column
