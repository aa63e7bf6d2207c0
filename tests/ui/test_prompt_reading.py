"""A long prompt shows reading progress with time left and can be stopped while it is read;
a follow-up after a restart reuses the conversation's KV state kept on disk."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from specchat import paths
from specchat import settings as cfg
from specchat.engine.types import StopReason
from specchat.tinymodels import TinyModels
from specchat.workers.generation import PromptProgress, RoundUpdate
from tests.ui.conftest import load_tiny

Maker = Callable[..., Any]
LONG = "Please summarise this long pasted report about speculative decoding. " * 40


def _window(qtbot: QtBot, make_window: Maker, tiny: TinyModels) -> Any:
    window = make_window()
    window.settings.set(cfg.MAX_TOKENS, 12)
    window.show()
    load_tiny(qtbot, window, tiny)
    window.controls.set_mode("plain")
    return window


def test_long_prompt_shows_reading_progress_then_answers(
    qtbot: QtBot, make_window: Maker, tiny_models: TinyModels
) -> None:
    window = _window(qtbot, make_window, tiny_models)
    seen: list[tuple[str, bool]] = []
    progress: list[PromptProgress] = []
    notes: list[str] = []

    def on_progress(update: PromptProgress) -> None:
        # What the window shows for this update (its own slots ran first), read before later
        # events (the first round's) are let through.
        progress.append(update)
        seen.append(
            (window.status_line.status_label.text(), window.status_line.load_bar.isVisible())
        )
        notes.append(window.chat_view.reading_note)
        QApplication.processEvents()

    window.answers.prompt_progress.connect(on_progress)
    with qtbot.waitSignal(window.answer_done, timeout=60_000):
        assert window.send(LONG)
    assert len(progress) >= 3
    last = progress[-1].reading
    assert last.done == last.total > 0
    assert all(text.startswith("Reading the prompt:") and bar for text, bar in seen)
    assert any("s left" in text for text, _bar in seen[1:])
    assert not window.status_line.load_bar.isVisible()
    assert not window.status_line.status_label.text().startswith("Reading")
    # Under the empty answer too, where the eye is; gone once the answer has text.
    assert all(note.startswith("Reading the conversation:") for note in notes)
    assert window.chat_view.reading_note == ""


def test_stop_while_the_prompt_is_read(
    qtbot: QtBot, make_window: Maker, tiny_models: TinyModels
) -> None:
    window = _window(qtbot, make_window, tiny_models)
    rounds: list[RoundUpdate] = []
    window.service.round_ready.connect(rounds.append)
    window.answers.prompt_progress.connect(lambda _p: window.stop())
    with qtbot.waitSignal(window.answer_done, timeout=60_000) as done:
        assert window.send(LONG)
    assert done.args[0].stop == StopReason.CANCELLED
    qtbot.waitUntil(lambda: not window.service.worker.busy, timeout=10_000)
    assert rounds == []  # stopped before a single token
    assert not window.status_line.load_bar.isVisible()


def test_follow_up_after_restart_reuses_the_kept_state(
    qtbot: QtBot, make_window: Maker, tiny_models: TinyModels
) -> None:
    window = _window(qtbot, make_window, tiny_models)
    window.controls.set_mode("draft")
    with qtbot.waitSignal(window.answer_done, timeout=60_000) as first:
        assert window.send(LONG)
    conversation = first.args[0].conversation_id
    # The target's state and the draft's (drafting modes need its cache too).
    assert len(list((paths.cache_dir() / "kv-state").glob("*.kv"))) == 2
    window.close()

    restarted = _window(qtbot, make_window, tiny_models)  # settings reopen the conversation
    assert restarted._conversation_id == conversation
    progress: list[PromptProgress] = []
    restarted.answers.prompt_progress.connect(progress.append)
    with qtbot.waitSignal(restarted.answer_done, timeout=60_000):
        assert restarted.send("And in one sentence?")
    reading = progress[-1].reading
    # Only the new message (and the template around it) was read: the rest came from disk.
    assert reading.restored > 300
    assert 0 < reading.total < 60
    assert not restarted.status_line.load_bar.isVisible()


def test_deleting_a_conversation_erases_its_kept_state(
    qtbot: QtBot, make_window: Maker, tiny_models: TinyModels
) -> None:
    window = _window(qtbot, make_window, tiny_models)
    window.controls.set_mode("draft")
    with qtbot.waitSignal(window.answer_done, timeout=60_000) as first:
        assert window.send(LONG)
    with qtbot.waitSignal(window.answer_done, timeout=60_000) as second:
        window.new_conversation()
        assert window.send(LONG + " Another one.")
    kept = paths.cache_dir() / "kv-state"
    assert len(list(kept.glob("*.kv"))) == 4  # two conversations, target and draft each
    window.store.delete(first.args[0].conversation_id)
    left = sorted(f.name for f in kept.glob("*"))
    assert len(left) == 4  # the other conversation's state and tokens files, per model
    assert all(
        name.split("-", 1)[1].startswith(f"{second.args[0].conversation_id}.") for name in left
    )
