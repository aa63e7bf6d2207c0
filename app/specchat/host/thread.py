"""An engine host on a thread of its own: `specchat serve`'s, where no window runs."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from specchat.host.engine_host import DEFAULT_CAPACITY, EngineHost

if TYPE_CHECKING:
    from specchat.engine.llamacpp.prefix_cache import PrefixCache
    from specchat.engine.session import ChatEngine
    from specchat.host.job_runner import JobRunner
    from specchat.host.jobs import Job


class HostThread:
    """Drives an `EngineHost` on one thread that alone calls the engine (llama.cpp); the
    server's executor. After a load it times the plain rate; then it steps the host while
    there is work and sleeps until the host wakes it.

    Attributes:
        host: the host it drives.
        ready: set once the plain rate was timed and jobs are answered.
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
        self.host = EngineHost(engine, capacity=capacity, prefixes=prefixes, profile=profile)
        self.ready = threading.Event()
        self._calibrate = calibrate_plain
        self._stop = threading.Event()
        self._work = threading.Event()
        self.host.wake = self._work.set
        self._thread = threading.Thread(target=self._run, name="specchat-engine", daemon=True)

    # --- the Executor protocol (any thread) --------------------------------------------------
    @property
    def runner(self) -> JobRunner:
        return self.host.runner

    @runner.setter
    def runner(self, runner: JobRunner) -> None:
        self.host.runner = runner

    def start(self) -> None:
        self.host.start()
        self._thread.start()

    def submit(self, job: Job) -> None:
        """Queue `job`; raises ApiError (503) when the queue is full or closing."""
        self.host.submit(job)

    @property
    def waiting(self) -> int:
        return self.host.waiting

    @property
    def running(self) -> bool:
        return self.host.running

    def stop(self, *, timeout_s: float = 10.0) -> bool:
        """Cancel the job in progress and every waiting one; True once the thread ended."""
        self._stop.set()
        self.host.stop()
        self._work.set()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        return not self._thread.is_alive()

    # --- the engine's thread -----------------------------------------------------------------
    def _run(self) -> None:
        if self._calibrate:
            self.host.calibrate(cancel=self._stop)
        self.ready.set()
        while not self._stop.is_set():
            # Cleared before the step: work that arrives during it wakes the wait below.
            self._work.clear()
            if not self.host.step():
                self._work.wait()
        engine = self.host.engine
        if engine is not None:
            engine.profiler.save()
            engine.estimates.save()
