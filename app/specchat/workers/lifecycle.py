"""One way to run a worker QObject on its own QThread: wiring, start and bounded shutdown."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from PySide6.QtCore import QObject, Qt, QThread, SignalInstance

log = logging.getLogger(__name__)


class WorkerLifecycle:
    """A service's worker thread, started once and shut down at most once.

    Every service (generation, download, optimise) runs its worker through one of these, so
    the wiring, the start and the bounded stop are written once.

    Attributes:
        thread: the worker's thread (named, for logs and debuggers).
    """

    def __init__(self, name: str) -> None:
        self.thread = QThread()
        self.thread.setObjectName(name)
        self._started = False
        self._stopped = False

    def start(
        self,
        service: QObject,
        worker: QObject,
        *,
        requests: Iterable[tuple[SignalInstance, Callable[..., object]]],
        relayed: Iterable[str],
    ) -> None:
        """Move `worker` to the thread, wire its whole lifecycle and start the thread.

        `requests` pairs the service's request signals with the worker's slots (queued, so
        they run on the worker's thread between its steps); each name in `relayed` is a signal
        of the worker re-emitted by the service's signal of the same name, so every receiver
        runs on the UI thread whatever it connects (a lambda connected to the worker would run
        on its thread). The worker's `closed` signal ends the thread, which then deletes the
        worker.
        """
        thread = self.thread
        worker.moveToThread(thread)
        queued = Qt.ConnectionType.QueuedConnection
        for signal, slot in requests:
            signal.connect(slot, queued)
        # closed → quit runs in the worker's thread: QThread.quit is thread-safe.
        worker.closed.connect(thread.quit, Qt.ConnectionType.DirectConnection)  # type: ignore[attr-defined]
        for name in relayed:
            getattr(worker, name).connect(getattr(service, name), queued)
        thread.finished.connect(worker.deleteLater)
        thread.start()
        self._started = True

    def stop(
        self,
        *,
        cancel: Callable[[], None],
        request_shutdown: Callable[[], None],
        timeout_s: float,
    ) -> bool:
        """Cancel running work, ask the worker to close, and wait for its thread at most
        `timeout_s`; True at once if never started or already stopped."""
        if not self._started or self._stopped:
            return True
        self._stopped = True
        cancel()
        request_shutdown()
        done = self.wait(timeout_s=timeout_s)
        if not done:
            log.warning("thread %s did not stop within %.1f s", self.thread.objectName(), timeout_s)
        return done

    def wait(self, *, timeout_s: float) -> bool:
        """Wait up to `timeout_s` for the thread to end; True once it has (or never started)."""
        if not self._started:
            return True
        return bool(self.thread.wait(int(timeout_s * 1000)))
