"""The "API" section under the conversation list: the "Serve API" switch, its address and
queue, and each API request as it streams, coloured like a chat (read-only)."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from specchat.ui.chat_view import ChatView
from specchat.ui.gauge import AcceptanceGauge
from specchat.workers.api_jobs import ApiEnded, ApiQueue, ApiRound, ApiService, ApiStarted

#: What the address line says while the server is off.
OFF = "Off: editors cannot reach SpecChat"


class ApiPanel(QWidget):
    """The switch and what the server is doing; drives an ApiService.

    Attributes:
        api: the service the switch starts and stops.
        switch: "Serve API" (off at start).
        address: where the server listens, or why it does not.
        queue: requests waiting and whether one is answered.
        requests: one read-only item per request (item data: its job number).
        view: the requests' questions and answers, tokens coloured by how they were made.
        gauge: the streaming request's acceptance (arc) and every request's so far (marker).

    Signals:
        serving(bool): the server started (True) or stopped (False).
    """

    serving = Signal(bool)

    def __init__(self, api: ApiService, *, port: int = 8080, parent: QWidget | None = None):
        super().__init__(parent)
        self.api = api
        self.port = port
        self.switch = QCheckBox("Serve API")
        self.switch.setToolTip(
            "An OpenAI-compatible API on this machine for editors (see the README, "
            '"Use it from your editor"), answered by the loaded pair'
        )
        self.address = QLabel(OFF)
        self.address.setWordWrap(True)
        self.address.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.queue = QLabel("")
        self.requests = QListWidget()
        self.requests.setObjectName("api-requests")
        self.view = ChatView()
        self.view.setObjectName("api-transcript")
        self.gauge = AcceptanceGauge()
        self._totals = (0, 0)  # accepted, drafted over every request this session
        self._answer = (0, 0)  # the same for the request streaming
        parts = QSplitter(Qt.Orientation.Vertical)
        parts.addWidget(self.requests)
        parts.addWidget(self.view)
        parts.setSizes([80, 160])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        title = QLabel("<b>API</b>")
        layout.addWidget(title)
        layout.addWidget(self.switch)
        layout.addWidget(self.address)
        row = QHBoxLayout()
        row.addWidget(self.queue, 1)
        row.addWidget(self.gauge)
        layout.addLayout(row)
        layout.addWidget(parts, 1)
        self._items: dict[int, QListWidgetItem] = {}
        self.switch.toggled.connect(self._on_switch)
        api.started.connect(self._on_started)
        api.round_ready.connect(self._on_round)
        api.ended.connect(self._on_ended)
        api.queue_changed.connect(self._on_queue)

    @Slot(bool)
    def _on_switch(self, on: bool) -> None:
        if not on:
            self.api.stop()
            self.address.setText(OFF)
            self.queue.setText("")
            self.serving.emit(False)
            return
        try:
            url = self.api.start(port=self.port)
        except (ValueError, OSError) as error:
            self.address.setText(f"Not serving: {error}")
            self.switch.blockSignals(True)
            self.switch.setChecked(False)
            self.switch.blockSignals(False)
            return
        self.address.setText(f"{url}  (model: {self._model()})")
        self.queue.setText("Waiting: 0")
        self.serving.emit(True)

    def _model(self) -> str:
        server = self.api.server
        served = getattr(server, "served", None)
        return str(getattr(served, "model_id", "?"))

    @Slot(ApiStarted)
    def _on_started(self, started: ApiStarted) -> None:
        item = QListWidgetItem(f"{started.label}: {started.question[:60]}")
        item.setData(Qt.ItemDataRole.UserRole, started.job_id)
        item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEditable)
        self.requests.addItem(item)
        self._items[started.job_id] = item
        self.view.add_user(started.question)
        self.view.begin_answer()
        self._answer = (0, 0)

    @Slot(ApiRound)
    def _on_round(self, update: ApiRound) -> None:
        self.view.append_round(update.result)
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

    @Slot(ApiQueue)
    def _on_queue(self, queue: ApiQueue) -> None:
        self.queue.setText(f"Waiting: {queue.waiting}" + (" · answering" if queue.busy else ""))


def _rate(accepted: int, drafted: int) -> float | None:
    return accepted / drafted if drafted else None


def with_api_section(conversations: QWidget, panel: ApiPanel) -> QSplitter:
    """The conversation list with the API section under it."""
    column = QSplitter(Qt.Orientation.Vertical)
    column.addWidget(conversations)
    column.addWidget(panel)
    column.setStretchFactor(0, 3)
    column.setStretchFactor(1, 1)
    return column
