"""Fixtures for window tests: a private SPECCHAT_HOME, settings, a store and a window."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from specchat import paths
from specchat.settings import Settings
from specchat.store.conversations import ConversationStore
from specchat.tinymodels import TinyModels


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """SPECCHAT_HOME in a temporary folder, so tests never touch the real config."""
    monkeypatch.setenv(paths.HOME_ENV, str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def make_window(qtbot: QtBot, home: Path) -> Iterator[Callable[..., object]]:
    """Builds MainWindows on the private home (fresh Settings and store each time)."""
    from specchat.ui.window.main_window import MainWindow

    made: list[tuple[MainWindow, ConversationStore]] = []

    def make(**kw: object) -> MainWindow:
        store = ConversationStore()
        window = MainWindow(settings=Settings(), store=store, autoload=False, n_threads=1, **kw)
        qtbot.addWidget(window)
        made.append((window, store))
        return window

    yield make
    for window, store in made:
        window.close()
        # Closing waits two seconds at most, as a person closing the window should; a test
        # must not end with the worker's thread still running, or the collection between
        # tests destroys a running QThread, which aborts the process.
        window.service.worker_thread.wait(30_000)
        store.close()


def load_tiny(
    qtbot: QtBot, window: object, tiny: TinyModels, *, draft: Path | None = None
) -> object:
    with qtbot.waitSignal(window.model_loaded, timeout=30_000) as blocker:  # type: ignore[attr-defined]
        window.load_files(tiny.target, draft or tiny.draft_close, label="tiny pair")  # type: ignore[attr-defined]
    return blocker.args[0]
