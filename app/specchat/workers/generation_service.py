"""GenerationService: the GenerationWorker on its own thread, driven through queued signals."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

from specchat.engine.types import Controls
from specchat.workers.generation import GenerationWorker
from specchat.workers.generation_payloads import (
    Failure,
    GenerateRequest,
    GenerationFinished,
    Loaded,
    LoadProgressUpdate,
    LoadRequest,
    PromptPrepared,
    PromptProgress,
    RoundUpdate,
)
from specchat.workers.host_adapter import HostSignals
from specchat.workers.lifecycle import WorkerLifecycle

if TYPE_CHECKING:
    from specchat.store.conversations import ConversationStore


class GenerationService(QObject):
    """A GenerationWorker on its own QThread, driven through queued signals.

    Attributes:
        worker: the worker (lives on `worker_thread`).
        worker_thread: the worker's thread (not `thread`, which QObject.thread() owns), run by
            the shared `WorkerLifecycle`.
        host_events: the worker's engine host's events (API jobs, its queue) as signals, on
            this object's (the UI's) thread.

    Signals:
        load_requested(LoadRequest), generate_requested(GenerateRequest),
        stop_requested(object: request id or None), controls_changed(Controls),
        shutdown_requested(): queued to the worker.
        load_progress, loaded, prepared, prompt_progress, round_ready, finished, failed: the
            worker's signals of the same names, re-emitted on this object's (the UI's) thread.
    """

    load_progress = Signal(LoadProgressUpdate)
    loaded = Signal(Loaded)
    prepared = Signal(PromptPrepared)
    prompt_progress = Signal(PromptProgress)
    round_ready = Signal(RoundUpdate)
    finished = Signal(GenerationFinished)
    failed = Signal(Failure)
    load_requested = Signal(LoadRequest)
    generate_requested = Signal(GenerateRequest)
    stop_requested = Signal(object)  # a request id, or None for whatever runs
    controls_changed = Signal(Controls)
    shutdown_requested = Signal()

    def __init__(
        self,
        *,
        n_threads: int | None = None,
        store: ConversationStore | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.worker = GenerationWorker(n_threads=n_threads, store=store)
        self.host_events = HostSignals(self.worker.host, parent=self)
        self._lifecycle = WorkerLifecycle("specchat-generation")
        self.worker_thread = self._lifecycle.thread
        self._next_id = 0
        self._current_request: int | None = None

    def start(self) -> None:
        """Wire the whole lifecycle in one place and start the thread."""
        worker = self.worker
        self._lifecycle.start(
            self,
            worker,
            requests=[
                (self.load_requested, worker._on_load_requested),
                (self.generate_requested, worker._on_generate_requested),
                (self.stop_requested, worker._on_stop_requested),
                (self.controls_changed, worker._on_controls_changed),
                (self.shutdown_requested, worker._on_shutdown_requested),
            ],
            relayed=(
                "load_progress",
                "loaded",
                "prepared",
                "prompt_progress",
                "round_ready",
                "finished",
                "failed",
            ),
        )

    # --- requests ------------------------------------------------------------------------
    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def load(self, request: LoadRequest) -> None:
        # A newer load supersedes older ones, running or queued: cancel them so this one
        # starts soon.
        self.worker.cancel_load()
        self.worker.note_load_request()
        self.worker.cancel_generation()
        self._current_request = None
        self.load_requested.emit(request)

    def generate(self, request: GenerateRequest) -> None:
        self.worker.cancel_generation()
        self._current_request = request.request_id
        self.generate_requested.emit(request)

    def stop(self) -> None:
        self.worker.cancel_generation()
        self.stop_requested.emit(self._current_request)
        self._current_request = None

    def update_controls(self, update: Controls) -> None:
        self.controls_changed.emit(update)

    def is_current(self, request_id: int) -> bool:
        return request_id == self._current_request

    def wait_stopped(self, *, timeout_s: float) -> bool:
        """After shutdown: wait up to `timeout_s` more for the thread; True once it ended."""
        return self._lifecycle.wait(timeout_s=timeout_s)

    def shutdown(self, *, timeout_s: float = 2.0) -> bool:
        """Cancel everything, release the engine on its thread and wait at most `timeout_s`."""

        def cancel() -> None:
            self.worker.cancel_generation()
            self.worker.cancel_load()

        return self._lifecycle.stop(
            cancel=cancel,
            request_shutdown=self.shutdown_requested.emit,
            timeout_s=timeout_s,
        )
