"""The `Executor` protocol: whatever runs the API's jobs on the engine's thread."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from specchat.host.jobs import Job

if TYPE_CHECKING:
    # Only named here: the HTTP side never loads the runner (and the engine code under it).
    from specchat.host.job_runner import JobRunner


class Executor(Protocol):
    """Whatever runs jobs on the engine's thread: an engine host (host/engine_host.py),
    on a thread of its own (`HostThread`, `specchat serve`) or on the window's generation
    worker's.

    Attributes:
        runner: answers each job.
    """

    runner: JobRunner

    def start(self) -> None: ...

    def submit(self, job: Job) -> None:
        """Queue `job`; raises ApiError (503) when the queue is full or closing."""

    @property
    def waiting(self) -> int: ...

    @property
    def running(self) -> bool: ...

    def stop(self, *, timeout_s: float = 10.0) -> bool:
        """Cancel what runs and waits; True once nothing runs any more."""
