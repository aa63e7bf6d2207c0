"""Cyclic garbage is collected on the GUI thread, never left to a worker thread."""

from __future__ import annotations

import gc
import threading

from pytestqt.qtbot import QtBot

from specchat.ui.window.application import create_application
from specchat.ui.window.gc_guard import GuiThreadCollector


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_the_gui_thread_collects_what_a_worker_left(qtbot: QtBot) -> None:
    enabled = gc.isenabled()
    collector = GuiThreadCollector()
    try:
        assert not gc.isenabled()
        gc.collect()
        collected_on: list[str] = []
        gc.callbacks.append(
            lambda phase, _info: (
                phase == "start" and collected_on.append(threading.current_thread().name)
            )
        )
        try:

            def make_garbage() -> None:
                for _ in range(5 * gc.get_threshold()[0]):
                    _Cycle()

            worker = threading.Thread(target=make_garbage, name="worker")
            worker.start()
            worker.join()
            assert collected_on == []  # the worker crossed every threshold and collected nothing
            qtbot.waitUntil(lambda: bool(collected_on), timeout=5_000)
            assert set(collected_on) == {threading.main_thread().name}
        finally:
            gc.callbacks.pop()
    finally:
        collector.stop()
        if not enabled:
            gc.disable()


def test_the_application_installs_it() -> None:
    app = create_application([])
    assert app.findChildren(GuiThreadCollector)
