"""The engine host through its Qt adapter, on the generation worker's thread: API jobs wait
for the window's answer, run on the worker's thread, and are told on the window's."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt, QTimer
from pytestqt.qtbot import QtBot

from specchat import paths
from specchat.engine.templates.chat_template import ChatMessage
from specchat.engine.types import Controls, SamplingParams
from specchat.host.chat_call import ChatCall
from specchat.host.events import ApiEnded, ApiQueue, ApiRound, ApiStarted
from specchat.host.jobs import Finished, Job, JobEvent
from specchat.tinymodels import TinyModels
from specchat.workers.generation import GenerateRequest, GenerationFinished, LoadRequest
from specchat.workers.generation_service import GenerationService

GREEDY = SamplingParams(temperature=0.0)


@pytest.fixture
def service(
    qtbot: QtBot, tiny_models: TinyModels, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[GenerationService]:
    # A home of its own: no cost table measured by an earlier test is found complete.
    monkeypatch.setenv(paths.HOME_ENV, str(tmp_path))
    svc = GenerationService(n_threads=1)
    svc.start()
    request = LoadRequest(1, target=tiny_models.target, n_ctx=2048, calibrate=False)
    with qtbot.waitSignal(svc.loaded, timeout=30_000):
        svc.load(request)
    yield svc
    assert svc.shutdown(timeout_s=10.0)


def worker_thread(qtbot: QtBot, svc: GenerationService) -> int:
    """The ident of the generation worker's thread."""
    ident: list[int] = []
    QTimer.singleShot(0, svc.worker, lambda: ident.append(threading.get_ident()))
    qtbot.waitUntil(lambda: bool(ident), timeout=5_000)
    return ident[0]


def test_a_job_waits_for_the_windows_answer_and_is_told_on_the_windows_thread(
    qtbot: QtBot, service: GenerationService
) -> None:
    host, events = service.worker.host, service.host_events
    host.start()
    told: list[tuple[int, object]] = []  # (receiving thread, what)
    for signal in (events.started, events.round_ready, events.ended, events.queue_changed):
        signal.connect(lambda event: told.append((threading.get_ident(), event)))
    service.finished.connect(lambda done: told.append((threading.get_ident(), done)))
    answered_on: list[int] = []
    delivered: list[JobEvent] = []

    def deliver(event: JobEvent) -> None:
        answered_on.append(threading.get_ident())
        delivered.append(event)

    call = ChatCall("m", (ChatMessage("user", "and you?"),), 12, Controls("plain", 0, GREEDY))
    job = Job(call, deliver=deliver, label="#1 from a test")
    # The window's answer is held after its first round, on the worker's thread, while the
    # job is submitted from this one: it must wait for that answer's end.
    held, gate = threading.Event(), threading.Event()
    busy: list[bool] = []

    def hold(_update: object) -> None:
        if not held.is_set():
            busy.append(service.worker.busy)
            held.set()
            gate.wait(10)

    service.worker.round_ready.connect(hold, Qt.ConnectionType.DirectConnection)
    question = (ChatMessage("user", "Tell me everything."),)
    service.generate(GenerateRequest(1, question, 100, Controls("plain", 0, GREEDY)))
    assert held.wait(30)
    try:
        host.submit(job)
    finally:
        gate.set()
    with qtbot.waitSignal(events.ended, timeout=30_000):
        pass
    assert busy == [True]  # submitted in the middle of the window's answer
    kinds = [type(e) for _, e in told]
    assert kinds.index(GenerationFinished) < kinds.index(ApiStarted) < kinds.index(ApiEnded)
    assert ApiRound in kinds and isinstance(delivered[-1], Finished)
    # Answered on the worker's thread; told, every event, on the window's.
    assert set(answered_on) == {worker_thread(qtbot, service)}
    assert {thread for thread, _ in told} == {threading.main_thread().ident}
    assert [e for _, e in told if isinstance(e, ApiQueue)][-1] == ApiQueue(0, False)


def test_between_answers_the_cost_table_is_measured_on_the_worker_thread(
    qtbot: QtBot, service: GenerationService
) -> None:
    profiler = service.worker.engine.profiler  # type: ignore[union-attr]
    ran_on: list[int] = []
    real = profiler.step

    def step() -> int | None:
        ran_on.append(threading.get_ident())
        return real()

    profiler.step = step  # type: ignore[method-assign]
    service.worker.host.wake()  # from this thread, as the server's would
    assert not profiler.done  # a fresh cost store: the table is owed
    qtbot.waitUntil(lambda: len(ran_on) >= 2, timeout=30_000)
    assert set(ran_on) == {worker_thread(qtbot, service)}
