"""The engine host: one engine's work in turn: API jobs queued in order and bounded, the
window's answers, and between them the cost table measured a pass at a time."""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from specchat.engine.baseline import BaselineMeter, PlainBaseline, PlainRounds, calibrate
from specchat.host.chat_call import latest_question
from specchat.host.errors import ApiError, busy
from specchat.host.events import ApiEnded, ApiQueue, ApiRound, ApiStarted, HostEvent
from specchat.host.job_runner import JobRunner
from specchat.host.jobs import Failed, Finished, Job

if TYPE_CHECKING:
    from specchat.engine.llamacpp.prefix_cache import PrefixCache
    from specchat.engine.session import ChatEngine
    from specchat.engine.types import RoundResult

log = logging.getLogger(__name__)

#: Requests that may wait behind the one being answered; past it, 503 with Retry-After.
DEFAULT_CAPACITY = 8
#: What a refused client is told to wait, in seconds.
RETRY_AFTER_S = 5


def _nobody() -> None:
    """No driver listens yet."""


class EngineHost:
    """Everything the engine's one thread does, in turn.

    API jobs queue in order, bounded (503 past it); an answer of the window's holds them
    until it ends, and a window request sent while a job runs waits for it; between answers
    the machine's cost table is measured a pass at a time, so `auto` prices passes from this
    machine. One plain rate is measured for all of them (`baseline`).

    Plain Python, driven by the thread that owns the engine: it calls `step` until that
    returns False, and again once `wake` is called. `HostThread` (host/thread.py) is that
    thread for `specchat serve`; in the window it is the generation worker's, through
    workers/host_adapter.py. `submit`, `waiting`, `running` and `stop` are for any thread.

    Attributes:
        engine: the loaded pair, or None (a job then fails with 503).
        capacity: jobs that may wait behind the one being answered.
        runner: answers the jobs (the window sets a new one each time it starts serving).
        baseline: the plain rate speed-ups are measured against, for every answer.
        wake: called from any thread when `step` has work (the driver sets it).
        listener: told each job's start, rounds and end and each change of the queue, on
            the thread that made it (so it must not block), or None.
    """

    def __init__(
        self,
        engine: ChatEngine | None = None,
        *,
        capacity: int = DEFAULT_CAPACITY,
        prefixes: PrefixCache | None = None,
        profile: bool = True,
    ) -> None:
        self.engine = engine
        self.capacity = capacity
        self.baseline = BaselineMeter()
        self.wake: Callable[[], None] = _nobody
        self.listener: Callable[[HostEvent], None] | None = None
        self._profile = profile
        # A pass that failed stops the measurement until the next answer ends.
        self._measuring = True
        self._lock = threading.Lock()
        self._jobs: collections.deque[Job] = collections.deque()
        self._open = False
        self._current: Job | None = None
        self._answering = False
        self._ids: dict[int, int] = {}
        self._next_id = 0
        self.runner = JobRunner(prefixes=prefixes)

    @property
    def runner(self) -> JobRunner:
        return self._runner

    @runner.setter
    def runner(self, runner: JobRunner) -> None:
        runner.on_job = self._on_job
        runner.on_round = self._on_round
        self._runner = runner

    # --- any thread (the server's Executor) --------------------------------------------------
    def start(self) -> None:
        """Take jobs (refused until now, and again after `stop`)."""
        with self._lock:
            self._open = True

    def submit(self, job: Job) -> None:
        """Queue `job`; raises ApiError (503) when the queue is full or closed."""
        with self._lock:
            waiting = len(self._jobs)
            # None may wait past `capacity`; with 0, a job is taken only while none runs.
            full = waiting >= self.capacity and (waiting > 0 or self._current is not None)
            if not self._open or full:
                raise busy(RETRY_AFTER_S)
            self._jobs.append(job)
            self._next_id += 1
            self._ids[id(job)] = self._next_id
            self._report_queue()
        self.wake()

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._jobs)

    @property
    def running(self) -> bool:
        return self._current is not None

    def stop(self, *, timeout_s: float = 10.0) -> bool:
        """Refuse new jobs and cancel every job: a waiting one is told the server is
        stopping, the running one stops at its next round. True: nothing here to wait for
        (the thread that runs the host is its driver's to end)."""
        with self._lock:
            self._open = False
            jobs, self._jobs = list(self._jobs), collections.deque()
            current = self._current
        if current is not None:
            current.cancel.set()
        for job in jobs:
            job.cancel.set()
            self._ids.pop(id(job), None)
            job.deliver(Failed(ApiError(503, "the server is stopping", kind="server_error")))
        return True

    # --- the engine's thread ------------------------------------------------------------------
    def attach(self, engine: ChatEngine | None, *, calibrated: PlainBaseline | None = None) -> None:
        """Another pair was loaded (None: released); `calibrated`, its plain rate timed
        after the load, stands until its answers have measured their own."""
        self.engine = engine
        self.baseline = BaselineMeter(calibrated)
        self._measuring = True

    def calibrate(self, *, cancel: threading.Event) -> None:
        """Time a few plain tokens now, so the first answer's speed-up is a measurement."""
        if self.engine is not None:
            self.baseline.calibrated = calibrate(self.engine, cancel=cancel)

    def begin_answer(self) -> PlainRounds:
        """An answer's first pass is about to run (the window's, or a job's: the runner
        calls it then): nothing is measured, and no job taken, until `end_answer`. Returns
        what times its plain rounds."""
        self._answering = True
        if self.engine is not None:
            self.engine.profiler.pause()
        return PlainRounds(self.baseline)

    def end_answer(self) -> None:
        """That answer ended (any stop, or a failure; a job's, begun or not): what its
        rounds taught is stored, and waiting jobs and the measurement go on."""
        self._answering = False
        self._measuring = True
        if self.engine is not None:
            self.engine.profiler.save()
            self.engine.estimates.save()
        self.wake()

    def step(self) -> bool:
        """Answer the next job, or else time one pass of the cost table; True while there
        is more (call again, after whatever else the thread has queued meanwhile)."""
        if self._answering:
            return False
        with self._lock:
            job = self._jobs.popleft() if self._jobs else None
            if job is not None:
                # Taken from the queue and answered in one step, as the window shows it.
                self._current = job
                self._report_queue()
        if job is None:
            return self._measure()
        engine = self.engine
        try:
            if engine is None:
                error = ApiError(503, "no model pair is loaded", kind="server_error")
                job.deliver(Failed(error))
            else:
                self.runner.run(engine, job, self.begin_answer)
        finally:
            # Not running from the moment its end is told (the runner's last hook).
            with self._lock:
                self._current = None
                self._ids.pop(id(job), None)
                self._report_queue()
            if engine is not None:
                self.end_answer()
        return True

    def _measure(self) -> bool:
        """One pass of the cost table's measurement; False when there is none to take."""
        engine = self.engine
        if engine is None or not self._profile or not self._measuring or engine.profiler.done:
            return False
        try:
            engine.profiler.step()
        except Exception:
            log.info("measuring the cost table failed", exc_info=True)
            self._measuring = False
            return False
        return True

    # --- what it tells ------------------------------------------------------------------------
    def _report_queue(self) -> None:
        # Called with the lock held: submit's thread and the engine's both report, and a
        # report read before another but told after it would leave the window showing a
        # queue that is gone.
        if self.listener is not None:
            self.listener(ApiQueue(len(self._jobs), self._current is not None))

    def _on_job(self, job: Job, last: object) -> None:
        listener = self.listener
        if listener is None:
            return
        job_id = self._ids.get(id(job), 0)
        if last is None:
            listener(ApiStarted(job_id, job.label, latest_question(job.call.messages)))
            return
        if isinstance(last, Finished):
            note = f"{last.summary.stats.emitted} tokens, {last.summary.stop.value}"
            reply = last.summary.reply
            if reply is not None and reply.calls:
                note += ", called " + ", ".join(call.name for call in reply.calls)
        elif isinstance(last, Failed):
            note = f"failed: {last.error.message}"
        else:
            note = "ended"
        listener(ApiEnded(job_id, note))

    def _on_round(self, job: Job, result: RoundResult, thinking: tuple[str, ...]) -> None:
        if self.listener is not None:
            self.listener(ApiRound(self._ids.get(id(job), 0), result, thinking))
