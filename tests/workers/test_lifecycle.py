"""Tests for workers/lifecycle.py: one wiring for every service's worker thread."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

from PySide6.QtCore import QObject, Signal, Slot
from pytestqt.qtbot import QtBot

from specchat.workers.lifecycle import WorkerLifecycle
from tests.helpers.imports import module_names

PACKAGE = Path(__file__).resolve().parents[2] / "app" / "specchat"


class _Worker(QObject):
    """Answers each request with the name of the thread it ran on."""

    answered = Signal(str)
    closed = Signal()

    @Slot(str)
    def _on_asked(self, text: str) -> None:
        self.answered.emit(f"{text} on {threading.current_thread().name}")

    @Slot()
    def _on_shutdown(self) -> None:
        self.closed.emit()


class _Service(QObject):
    asked = Signal(str)
    shutdown_requested = Signal()
    answered = Signal(str)


def test_requests_run_on_the_worker_thread_and_replies_reach_the_ui_thread(
    qtbot: QtBot,
) -> None:
    service, worker = _Service(), _Worker()
    lifecycle = WorkerLifecycle("test-worker")
    lifecycle.start(
        service,
        worker,
        requests=[
            (service.asked, worker._on_asked),
            (service.shutdown_requested, worker._on_shutdown),
        ],
        relayed=("answered",),
    )
    received: list[tuple[str, str]] = []
    service.answered.connect(lambda text: received.append((text, threading.current_thread().name)))
    with qtbot.waitSignal(service.answered, timeout=5_000):
        service.asked.emit("hello")
    (text, receiver_thread) = received[0]
    assert text.startswith("hello on ") and text != f"hello on {receiver_thread}"
    assert receiver_thread == threading.main_thread().name
    cancelled: list[bool] = []
    assert lifecycle.stop(
        cancel=lambda: cancelled.append(True),
        request_shutdown=service.shutdown_requested.emit,
        timeout_s=5.0,
    )
    assert lifecycle.thread.isFinished() and cancelled == [True]
    # Stopped once: a second stop neither cancels again nor waits.
    assert lifecycle.stop(
        cancel=lambda: cancelled.append(True), request_shutdown=lambda: None, timeout_s=0.0
    )
    assert cancelled == [True]
    assert lifecycle.wait(timeout_s=0.0)


def test_a_lifecycle_never_started_stops_and_waits_at_once() -> None:
    lifecycle = WorkerLifecycle("never-started")
    cancelled: list[bool] = []
    assert lifecycle.wait(timeout_s=0.0)
    assert lifecycle.stop(
        cancel=lambda: cancelled.append(True), request_shutdown=lambda: None, timeout_s=0.0
    )
    assert cancelled == []


def test_only_the_lifecycle_module_makes_a_thread() -> None:
    # Every service runs its worker through WorkerLifecycle: a QThread made anywhere else is
    # a second copy of the wiring, start and bounded stop.
    makers = []
    for name, path in module_names(PACKAGE).items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            called = node.func if isinstance(node, ast.Call) else None
            if (isinstance(called, ast.Name) and called.id == "QThread") or (
                isinstance(called, ast.Attribute) and called.attr == "QThread"
            ):
                makers.append(name)
    assert makers == ["specchat.workers.lifecycle"]
