"""The engine host in the window: its steps run on the generation worker's thread, between
the window's answers, and its events reach the widgets as signals on the window's thread."""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Qt, Signal, Slot

from specchat.host.engine_host import EngineHost
from specchat.host.events import ApiEnded, ApiQueue, ApiRound, ApiStarted, HostEvent


class HostDriver(QObject):
    """Steps an `EngineHost` on this object's thread (the engine's).

    The host's `wake` (from any thread) queues one step to this thread; a step answers one
    job or times one pass, then queues the next while there is more, so whatever the window
    sent meanwhile (a request, a stop) runs between them.

    Attributes:
        host: the host driven.
    """

    #: Internal: the host has work; runs one step on this object's thread.
    _step = Signal()

    def __init__(self, host: EngineHost, *, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.host = host
        self._lock = threading.Lock()
        self._queued = False  # one step waits in the event queue: a wake adds no other
        self._step.connect(self._on_step, Qt.ConnectionType.QueuedConnection)
        host.wake = self.wake

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


class HostSignals(QObject):
    """An `EngineHost`'s events as signals, for widgets; lives on the window's thread.

    Each event is emitted on the thread that made it (the server's for a job queued, the
    engine's for a job's progress). Living on the window's thread, this object is the
    context of every connection to it, a lambda's too: each event is queued to the window
    at once, never behind the job the engine's thread is answering.

    Signals:
        started(ApiStarted), round_ready(ApiRound), ended(ApiEnded): an API job's progress.
        queue_changed(ApiQueue): the host's queue grew or shrank.
    """

    started = Signal(ApiStarted)
    round_ready = Signal(ApiRound)
    ended = Signal(ApiEnded)
    queue_changed = Signal(ApiQueue)

    def __init__(self, host: EngineHost, *, parent: QObject | None = None) -> None:
        super().__init__(parent)
        host.listener = self._tell

    def _tell(self, event: HostEvent) -> None:
        if isinstance(event, ApiRound):
            self.round_ready.emit(event)
        elif isinstance(event, ApiQueue):
            self.queue_changed.emit(event)
        elif isinstance(event, ApiStarted):
            self.started.emit(event)
        else:
            self.ended.emit(event)
