"""The engine host on the generation worker's thread: its steps run there, between the
window's answers, and its events reach the widgets as signals."""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Qt, Signal, Slot

from specchat.host.engine_host import EngineHost
from specchat.host.events import ApiEnded, ApiQueue, ApiRound, ApiStarted, HostEvent


class HostAdapter(QObject):
    """Drives an `EngineHost` on this object's thread and relays what it tells.

    The host's `wake` (from any thread) queues one step to this thread; a step answers one
    job or times one pass, then queues the next while there is more, so whatever the window
    sent meanwhile (a request, a stop) runs between them. The host's events are emitted on
    the thread that made them: a receiver on the window's thread gets each queued there at
    once, never behind a job this thread is answering.

    Attributes:
        host: the host driven.

    Signals:
        started(ApiStarted), round_ready(ApiRound), ended(ApiEnded): an API job's progress.
        queue_changed(ApiQueue): the host's queue grew or shrank.
    """

    started = Signal(ApiStarted)
    round_ready = Signal(ApiRound)
    ended = Signal(ApiEnded)
    queue_changed = Signal(ApiQueue)
    #: Internal: the host has work; runs one step on this object's thread.
    _step = Signal()

    def __init__(self, host: EngineHost, *, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.host = host
        self._lock = threading.Lock()
        self._queued = False  # one step waits in the event queue: a wake adds no other
        self._step.connect(self._on_step, Qt.ConnectionType.QueuedConnection)
        host.wake = self.wake
        host.listener = self._tell

    def wake(self) -> None:
        """From any thread: step the host soon, on this object's thread."""
        with self._lock:
            if self._queued:
                return
            self._queued = True
        self._step.emit()

    @Slot()
    def _on_step(self) -> None:
        with self._lock:
            self._queued = False
        if self.host.step():
            self.wake()

    def _tell(self, event: HostEvent) -> None:
        if isinstance(event, ApiRound):
            self.round_ready.emit(event)
        elif isinstance(event, ApiQueue):
            self.queue_changed.emit(event)
        elif isinstance(event, ApiStarted):
            self.started.emit(event)
        else:
            self.ended.emit(event)
