"""The one thread that owns the engine: requests queue for it in order, bounded."""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from typing import TYPE_CHECKING

from specchat.engine.baseline import calibrate
from specchat.serve.errors import ApiError, busy
from specchat.serve.jobs import Failed, Job
from specchat.serve.runner import JobRunner

if TYPE_CHECKING:
    from specchat.engine.llamacpp.prefix_cache import PrefixCache
    from specchat.engine.session import ChatEngine

log = logging.getLogger(__name__)

#: Requests that may wait behind the one being answered; past it, 503 with Retry-After.
DEFAULT_CAPACITY = 8
#: What a refused client is told to wait, in seconds.
RETRY_AFTER_S = 5


class EngineThread:
    """Runs jobs on one thread that alone calls the engine (llama.cpp).

    Between jobs it measures the machine's cost table a pass at a time (as the window's
    worker does), so `auto` prices passes from this machine.

    Attributes:
        engine: the loaded pair.
        capacity: jobs that may wait.
        runner: answers the jobs (its hooks see them start, stream and end).
    """

    def __init__(
        self,
        engine: ChatEngine,
        *,
        capacity: int = DEFAULT_CAPACITY,
        calibrate_plain: bool = True,
        prefixes: PrefixCache | None = None,
        profile: bool = True,
    ) -> None:
        self.engine = engine
        self.capacity = capacity
        self.runner = JobRunner(prefixes=prefixes)
        self._calibrate = calibrate_plain
        self._profile = profile
        self._jobs: queue.Queue[Job | None] = queue.Queue(maxsize=capacity)
        self._stop = threading.Event()
        self._current: Job | None = None
        self._thread = threading.Thread(target=self._run, name="specchat-engine", daemon=True)
        self.ready = threading.Event()

    # --- any thread ------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def submit(self, job: Job) -> None:
        """Queue `job`; raises ApiError (503) when the queue is full or closing."""
        if self._stop.is_set():
            raise busy(RETRY_AFTER_S)
        try:
            self._jobs.put_nowait(job)
        except queue.Full:
            raise busy(RETRY_AFTER_S) from None

    @property
    def waiting(self) -> int:
        return self._jobs.qsize()

    @property
    def running(self) -> bool:
        return self._current is not None

    def stop(self, *, timeout_s: float = 10.0) -> bool:
        """Cancel the job in progress and every waiting one; True once the thread ended."""
        self._stop.set()
        current = self._current
        if current is not None:
            current.cancel.set()
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                job.cancel.set()
                job.deliver(Failed(ApiError(503, "the server is stopping", kind="server_error")))
        with contextlib.suppress(queue.Full):
            self._jobs.put_nowait(None)
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        return not self._thread.is_alive()

    # --- the engine thread -------------------------------------------------------------------
    def _run(self) -> None:
        if self._calibrate:
            self.runner.baseline.calibrated = calibrate(self.engine, cancel=self._stop)
        self.ready.set()
        while not self._stop.is_set():
            try:
                job = self._jobs.get(timeout=None if self._idle_done() else 0.0)
            except queue.Empty:
                self._measure()
                continue
            if job is None:
                break
            self._current = job
            try:
                self.runner.run(self.engine, job)
            finally:
                self._current = None
        self.engine.profiler.save()

    def _idle_done(self) -> bool:
        return not self._profile or self.engine.profiler.done

    def _measure(self) -> None:
        """One pass of the cost table's measurement, between jobs."""
        try:
            self.engine.profiler.step()
        except Exception:
            log.info("measuring the cost table failed", exc_info=True)
            self._profile = False
