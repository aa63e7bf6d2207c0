"""SIGKILL the real app mid-answer and start it again; damaged and mismatched model files
loaded through the window end in a readable message and leave the app usable."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from specchat import paths
from specchat import settings as cfg
from specchat.engine.types import StopReason
from specchat.settings import Settings
from specchat.store.conversations import DB_NAME, ConversationStore
from specchat.tinymodels import TinyModels
from specchat.ui.window.main_window import MainWindow

QUESTIONS = ("What is speculative decoding?", "And a draft model?")
LONG_QUESTION = "Now tell me everything, at length."

#: The real app (specchat.ui.window.application.run_app) with a driver that types into the
#: composer: two short answers, then a long one the parent kills. Prints what it saw, for the
#: parent.
CHILD = textwrap.dedent(
    f"""
    import sys
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication
    import specchat.engine.llamacpp.model
    from specchat import settings as cfg
    from specchat.ui.window.application import create_application, run_app
    from specchat.ui.window.main_window import MainWindow

    QUESTIONS = {QUESTIONS!r}
    LONG_QUESTION = {LONG_QUESTION!r}
    # One decode thread, as the in-process tests use: on a small shared CI machine a second
    # llama.cpp thread spin-waiting against other processes makes even the tiny model crawl.
    specchat.engine.llamacpp.model.default_threads = lambda _size: 1
    app = create_application(sys.argv)
    asked = []

    def ask(window, text):
        asked.append(text)
        window.composer.setPlainText(text)
        window.composer.submitted.emit()  # what Enter in the composer does

    def drive():
        (window,) = [w for w in app.topLevelWidgets() if isinstance(w, MainWindow)]

        def on_loaded(_loaded):
            print("loaded", flush=True)
            ask(window, QUESTIONS[0])

        def on_done(done):
            print(f"done {{done.message_id}} {{done.stop.name}}", flush=True)
            if len(asked) < len(QUESTIONS):
                ask(window, QUESTIONS[len(asked)])
            elif len(asked) == len(QUESTIONS):
                window.settings.set(cfg.MAX_TOKENS, 1_000_000)
                ask(window, LONG_QUESTION)

        def on_error(message):
            print(f"error {{message}}", flush=True)

        window.model_loaded.connect(on_loaded)
        window.answer_done.connect(on_done)
        window.error_shown.connect(on_error)

    # Queued before run_app builds the window, so it runs before the window's own autoload.
    QTimer.singleShot(0, drive)
    sys.exit(run_app(sys.argv))
    """
)


def _configure(home: Path, tiny: TinyModels) -> Settings:
    settings = Settings(home / "config" / "settings.json")
    settings.set(cfg.PAIR_ID, "custom")
    settings.set(cfg.CUSTOM_TARGET, str(tiny.target))
    settings.set(cfg.CUSTOM_DRAFT, str(tiny.draft_close))
    settings.set(cfg.MAX_TOKENS, 24)
    # Room for an answer long enough to be killed in the middle of.
    settings.set(cfg.N_CTX, 16384)
    settings.set(cfg.TARGET_GPU_LAYERS, 0)
    settings.set(cfg.DRAFT_GPU_LAYERS, 0)
    return settings


def _partial(db_path: Path) -> tuple[int, int] | None:
    """(id, length) of an unfinished answer with text in it, read without writing."""
    if not db_path.exists():
        return None
    try:
        db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=1.0)
    except sqlite3.Error:
        return None
    try:
        row = db.execute(
            "SELECT id, length(content) FROM messages WHERE role = 'assistant' AND finished = 0 "
            "AND length(content) > 0 ORDER BY id DESC LIMIT 1"
        ).fetchone()
    except sqlite3.Error:
        return None  # the schema is being created
    finally:
        db.close()
    return (int(row[0]), int(row[1])) if row else None


def test_sigkill_mid_answer_then_restart(
    qtbot: QtBot, tiny_models: TinyModels, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv(paths.HOME_ENV, str(home))
    _configure(home, tiny_models)
    db_path = paths.data_dir() / DB_NAME
    env = {**os.environ, paths.HOME_ENV: str(home), "QT_QPA_PLATFORM": "offscreen"}
    log_path = tmp_path / "child.log"
    with log_path.open("w") as log:
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD], env=env, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        # The short answers first (the child prints each), then the long one's first save.
        deadline = time.monotonic() + 60
        partial = None
        while time.monotonic() < deadline and child.poll() is None:
            finished = log_path.read_text().count("\ndone ")
            partial = _partial(db_path) if finished == len(QUESTIONS) else None
            if partial is not None:
                break
            time.sleep(0.02)
        lines = log_path.read_text().splitlines()
        assert partial is not None, f"no partial answer was written: {lines[-20:]}"
        time.sleep(0.2)  # let it stream and save a little more, then kill it mid-answer
        assert child.poll() is None, lines[-20:]
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    lines = log_path.read_text().splitlines()
    assert child.returncode == -signal.SIGKILL, lines[-20:]
    done = [line.split() for line in lines if line.startswith("done ")]
    assert len(done) == len(QUESTIONS), lines[-20:]
    assert all(stop in ("MAX_TOKENS", "EOS") for _d, _id, stop in done)
    finished_ids = [int(message_id) for _d, message_id, _stop in done]
    assert not any(line.startswith("error") or "Traceback" in line for line in lines), lines

    # The database opens cleanly and holds everything finished before the kill.
    raw = sqlite3.connect(db_path)
    try:
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        raw.close()
    store = ConversationStore()
    try:
        assert store.recovered_from is None
        (conversation,) = store.conversations()
        messages = store.messages(conversation.id)
        roles = [(m.role, m.finished) for m in messages]
        assert roles == [
            ("user", True),
            ("assistant", True),
            ("user", True),
            ("assistant", True),
            ("user", True),
            ("assistant", False),
        ]
        assert [m.content for m in messages if m.role == "user"] == [*QUESTIONS, LONG_QUESTION]
        assert [m.id for m in messages if m.role == "assistant" and m.finished] == finished_ids
        assert all(m.content and m.stats for m in messages if m.finished and m.role != "user")
        # The partial answer is kept, unfinished, with at least what the parent saw written.
        last = messages[-1]
        assert last.id == partial[0] and len(last.content) >= partial[1]
        assert last.token_kinds and "".join(t for t, _k in last.token_kinds) == last.content

        # A new window over the same home reopens the conversation, the partial marked.
        window = MainWindow(settings=Settings(), store=store, autoload=False, n_threads=1)
        qtbot.addWidget(window)
        try:
            assert window._conversation_id == conversation.id
            assert window.chat_view.message_count() == len(messages)
            assert window.chat_view.answer_markdown() == last.content
            assert "unfinished" in window.chat_view.toPlainText()
            assert window.chat_view.answer_markdown(0) == messages[1].content
            # …and carries on: the settings the killed app wrote load the pair, and it answers.
            window.settings.set(cfg.MAX_TOKENS, 16)
            with qtbot.waitSignal(window.model_loaded, timeout=30_000):
                window.load_from_settings()
            with qtbot.waitSignal(window.answer_done, timeout=30_000) as blocker:
                assert window.send("Still there?")
            assert blocker.args[0].stop in (StopReason.MAX_TOKENS, StopReason.EOS)
            assert len(store.messages(conversation.id)) == len(messages) + 2
        finally:
            window.close()
    finally:
        store.close()


def _truncated(source: Path, folder: Path, size: int) -> Path:
    data = source.read_bytes()
    size = size if size > 0 else len(data) + size
    path = folder / f"{source.stem}-first{size}.gguf"
    path.write_bytes(data[:size])
    return path


def test_bad_model_files_in_the_window_end_in_a_message(
    qtbot: QtBot, tiny_models: TinyModels, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(paths.HOME_ENV, str(tmp_path / "home"))
    store = ConversationStore()
    window = MainWindow(settings=Settings(), store=store, autoload=False, n_threads=1)
    qtbot.addWidget(window)
    window.settings.set(cfg.MAX_TOKENS, 12)
    window.show()
    try:
        attempts: list[tuple[str, Path, Path | None, str]] = []
        # In the header, the metadata, the tensor infos, the weights, and one byte short.
        for size in (10, 100, 2_000, 30_000, 250_000, -1):
            cut = _truncated(tiny_models.target, tmp_path, size)
            attempts.append(
                (f"target cut to {cut.stat().st_size} bytes", cut, None, "could not be loaded")
            )
        cut_draft = _truncated(tiny_models.draft_close, tmp_path, 300_000)
        attempts.append(("draft cut short", tiny_models.target, cut_draft, "could not be loaded"))
        attempts.append(
            ("incompatible draft", tiny_models.target, tiny_models.odd_vocab, "Incompatible draft")
        )
        for what, target, draft, expected in attempts:
            with qtbot.waitSignal(window.error_shown, timeout=30_000) as blocker:
                window.load_files(target, draft, label=what)
            message = blocker.args[0]
            print(f"{what}: {message}")
            assert expected in message, f"{what}: {message}"
            assert "Traceback" not in message and 'File "' not in message, f"{what}: {message}"
            assert window.banner.isVisible() and window.banner.label.text() == message
            assert window.status_line.status_label.text() == "The model could not be loaded."
            assert not window.chat_pane.send_button.isEnabled()
            assert not window.send("hello?")  # refused with a message, not a crash
        # Still usable: a good pair loads and answers, twice.
        with qtbot.waitSignal(window.model_loaded, timeout=30_000):
            window.load_files(tiny_models.target, tiny_models.draft_close, label="tiny")
        assert not window.banner.isVisible()
        for question in ("Hello?", "Again?"):
            with qtbot.waitSignal(window.answer_done, timeout=30_000) as blocker:
                assert window.send(question)
            assert blocker.args[0].stop in (StopReason.MAX_TOKENS, StopReason.EOS)
    finally:
        window.close()
        store.close()
