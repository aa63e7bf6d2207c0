"""API requests answered on the generation worker's thread, between the window's answers:
the window and the server share the loaded pair, and each waits its turn."""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt, QTimer, Signal, Slot

from specchat.engine.types import RoundResult

if TYPE_CHECKING:
    from specchat.serve.jobs import Job
    from specchat.serve.keeper import ChatKeeper
    from specchat.serve.runner import JobRunner
    from specchat.workers.generation import GenerationWorker

#: How often a request waiting for the window's answer to end looks again, in ms.
RETRY_MS = 50
#: Where a person sets the window's API key (named when an address needs one).
KEY_FROM = "an API key in File → Settings… (API, Key)"


@dataclass(frozen=True)
class ApiStarted:
    """An API request began (its prompt is being read).

    Attributes:
        job_id: the job's number in this run.
        label: the request's number and client ("#3 from 127.0.0.1").
        question: its last user message, or the tool results the chat ends with.
    """

    job_id: int
    label: str
    question: str


@dataclass(frozen=True)
class ApiRound:
    """One round of an API request's answer.

    Attributes:
        job_id: the job's number.
        result: the round.
    """

    job_id: int
    result: RoundResult


@dataclass(frozen=True)
class ApiEnded:
    """An API request ended.

    Attributes:
        job_id: the job's number.
        note: how it ended, for people ("62 tokens, 2.1× plain" or the error).
    """

    job_id: int
    note: str


@dataclass(frozen=True)
class ApiQueue:
    """The server's queue.

    Attributes:
        waiting: requests waiting their turn.
        busy: whether one is being answered.
    """

    waiting: int
    busy: bool


class ApiJobs(QObject):
    """Runs API jobs on the generation worker's thread (the server's `Executor` there).

    Jobs are answered in order, one at a time, each in one go; one arriving while the window
    answers waits for that answer to end, and a window request sent meanwhile waits for the
    job. Lives on the worker's thread (`moveToThread`); `submit` is called from the server's.

    Attributes:
        runner: answers each job with the worker's engine.
        capacity: jobs that may wait.

    Signals:
        started(ApiStarted), round_ready(ApiRound), ended(ApiEnded): a job's progress.
        queue_changed(ApiQueue): the queue grew or shrank.
    """

    started = Signal(ApiStarted)
    round_ready = Signal(ApiRound)
    ended = Signal(ApiEnded)
    queue_changed = Signal(ApiQueue)
    #: Internal: a job was queued; runs the queue on the worker's thread.
    _kick = Signal()

    def __init__(self, worker: GenerationWorker, runner: JobRunner, *, capacity: int) -> None:
        super().__init__()
        self.runner = runner
        self.capacity = capacity
        self._worker = worker
        self._lock = threading.Lock()
        self._jobs: collections.deque[Job] = collections.deque()
        self._ids: dict[int, int] = {}
        self._next_id = 0
        self._running = False
        self._current: Job | None = None
        self._stopped = False
        self._kick.connect(self._on_kick, Qt.ConnectionType.QueuedConnection)
        runner.on_job = self._on_job
        runner.on_round = self._on_round

    # --- any thread (the Executor protocol) -------------------------------------------------
    def start(self) -> None:
        """Nothing to start: the worker's thread runs already."""

    def submit(self, job: Job) -> None:
        from specchat.serve.engine_thread import RETRY_AFTER_S
        from specchat.serve.errors import busy

        with self._lock:
            if self._stopped or len(self._jobs) >= self.capacity:
                raise busy(RETRY_AFTER_S)
            self._jobs.append(job)
            self._next_id += 1
            self._ids[id(job)] = self._next_id
        self._report_queue()
        self._kick.emit()

    @property
    def waiting(self) -> int:
        with self._lock:
            return len(self._jobs)

    @property
    def running(self) -> bool:
        return self._running

    def stop(self, *, timeout_s: float = 10.0) -> bool:
        """Refuse new jobs and cancel every job, waiting or running (a running one stops at
        its next round, on the worker's thread)."""
        from specchat.serve.errors import ApiError
        from specchat.serve.jobs import Failed

        with self._lock:
            self._stopped = True
            jobs, self._jobs = list(self._jobs), collections.deque()
        current = self._current
        if current is not None:
            current.cancel.set()
        for job in jobs:
            job.cancel.set()
            job.deliver(Failed(ApiError(503, "the server is stopping", kind="server_error")))
        return True

    # --- the worker's thread ------------------------------------------------------------------
    @Slot()
    def _on_kick(self) -> None:
        if self._running:
            return
        if self._worker.busy:
            # The window's answer goes on round by round on this thread: after it.
            QTimer.singleShot(RETRY_MS, self._on_kick)
            return
        with self._lock:
            job = self._jobs.popleft() if self._jobs else None
            if job is None:
                return
            # Taken from the queue and answered in one step, as the window shows it.
            self._running, self._current = True, job
        self._report_queue()
        engine = self._worker.engine
        try:
            if engine is None:
                from specchat.serve.errors import ApiError
                from specchat.serve.jobs import Failed

                error = ApiError(503, "no model pair is loaded", kind="server_error")
                job.deliver(Failed(error))
            else:
                self.runner.run(engine, job)
        finally:
            with self._lock:
                self._running, self._current = False, None
        self._report_queue()
        self._kick.emit()  # the next one, after whatever the window queued meanwhile

    def _on_job(self, job: Job, last: object) -> None:
        from specchat.serve.jobs import Failed, Finished
        from specchat.serve.parsing import latest_question

        job_id = self._ids.get(id(job), 0)
        if last is None:
            question = latest_question(job.call.messages)
            self.started.emit(ApiStarted(job_id, job.label, question))
            return
        self._ids.pop(id(job), None)
        if isinstance(last, Finished):
            stats = last.summary.stats
            note = f"{stats.emitted} tokens, {last.summary.stop.value}"
            reply = last.summary.tool_reply
            if reply is not None and reply.calls:
                note += ", called " + ", ".join(call.name for call in reply.calls)
        elif isinstance(last, Failed):
            note = f"failed: {last.error.message}"
        else:
            note = "ended"
        self.ended.emit(ApiEnded(job_id, note))

    def _on_round(self, job: Job, result: RoundResult) -> None:
        self.round_ready.emit(ApiRound(self._ids.get(id(job), 0), result))

    def _report_queue(self) -> None:
        # Read and sent under the lock: the server's thread and the worker's both report,
        # and a report read before another but sent after it would leave the window showing
        # a queue that is gone.
        with self._lock:
            self.queue_changed.emit(ApiQueue(len(self._jobs), self._running))


class ApiService(QObject):
    """The window's "Serve API" switch: a server over the generation worker's pair.

    Attributes:
        server: the server while it runs, else None.
        jobs: its executor on the worker's thread, while it runs.
        keeper: gives the writer of API chats to the conversation store when they are kept
            (asked at each start: the setting may have changed), else None.

    Signals:
        started(ApiStarted), round_ready(ApiRound), ended(ApiEnded), queue_changed(ApiQueue):
            relayed from the jobs, on this object's (the window's) thread.
    """

    started = Signal(ApiStarted)
    round_ready = Signal(ApiRound)
    ended = Signal(ApiEnded)
    queue_changed = Signal(ApiQueue)

    def __init__(
        self,
        worker: GenerationWorker,
        *,
        keeper: Callable[[], ChatKeeper | None] = lambda: None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._worker = worker
        self._keeper = keeper
        self.server: object | None = None
        self.jobs: ApiJobs | None = None

    def start(self, *, host: str = "127.0.0.1", port: int = 8080, api_key: str = "") -> str:
        """Serve the loaded pair; returns the base URL. ValueError or OSError (the address
        is taken) say why it cannot."""
        from specchat.engine.llamacpp.prefix_cache import PrefixCache
        from specchat.serve.app import ServedModel, served_model
        from specchat.serve.guard import ServeOptions, check_options
        from specchat.serve.runner import JobRunner
        from specchat.serve.server import ApiServer

        self.stop()
        engine = self._worker.engine
        if engine is None:
            raise ValueError("load a model pair first")
        options = ServeOptions(host=host.strip(), port=port, api_key=api_key)
        check_options(options, key_from=KEY_FROM, port_from="the API port (api.port)")
        runner = JobRunner(prefixes=PrefixCache())
        runner.keeper = self._keeper()
        jobs = ApiJobs(self._worker, runner, capacity=options.capacity)
        jobs.moveToThread(self._worker.thread())
        # To this object's slots, so each is queued to the window's thread as it is sent,
        # from whichever thread: relayed through the jobs' own thread, the server's reports
        # would wait there behind the job being answered and arrive after newer ones.
        jobs.started.connect(self._on_started)
        jobs.round_ready.connect(self._on_round)
        jobs.ended.connect(self._on_ended)
        jobs.queue_changed.connect(self._on_queue)
        first = served_model(engine)
        worker = self._worker

        def served() -> ServedModel:
            # The pair loaded now: the window may load another while the server runs.
            now = worker.engine
            return served_model(now) if now is not None else first

        server = ApiServer(jobs, served, options)
        try:
            address = server.bind()
        except OSError:
            jobs.deleteLater()
            raise
        server.start()
        self.server, self.jobs = server, jobs
        return address.base_url

    @Slot(ApiStarted)
    def _on_started(self, started: ApiStarted) -> None:
        self.started.emit(started)

    @Slot(ApiRound)
    def _on_round(self, update: ApiRound) -> None:
        self.round_ready.emit(update)

    @Slot(ApiEnded)
    def _on_ended(self, ended: ApiEnded) -> None:
        self.ended.emit(ended)

    @Slot(ApiQueue)
    def _on_queue(self, queue: ApiQueue) -> None:
        self.queue_changed.emit(queue)

    def stop(self) -> bool:
        """Close the port and cancel what waits; True once the server ended."""
        from specchat.serve.server import ApiServer

        server, self.server = self.server, None
        jobs, self.jobs = self.jobs, None
        stopped = True
        if isinstance(server, ApiServer):
            stopped = server.stop(timeout_s=5.0)
        if jobs is not None:
            jobs.deleteLater()
        return stopped
