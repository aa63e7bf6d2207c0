"""A store that refuses writes (the file is locked): the window says so and loses nothing."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from specchat.settings import Settings
from specchat.store.conversations import ConversationStore
from specchat.tinymodels import TinyModels
from specchat.ui.window.main_window import MainWindow
from tests.ui.conftest import load_tiny


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Another connection holds the database's write lock: every write is refused as locked."""
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN EXCLUSIVE")
        yield
    finally:
        if other.in_transaction:
            other.execute("ROLLBACK")
        other.close()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "conversations.db"


@pytest.fixture
def store(db: Path, home: Path) -> Iterator[ConversationStore]:
    # A short busy timeout: the lock is never released while the write waits.
    with ConversationStore(db, busy_timeout_s=0.2) as opened:
        yield opened


@pytest.fixture
def window(qtbot: QtBot, store: ConversationStore) -> Iterator[MainWindow]:
    made = MainWindow(settings=Settings(), store=store, autoload=False, n_threads=1)
    qtbot.addWidget(made)
    yield made
    made.close()


def _error(window: MainWindow) -> str:
    assert window.banner.kind == "error" and window.banner.isVisibleTo(window)
    return str(window.banner.label.text())


def test_a_message_that_cannot_be_saved_stays_in_the_composer(
    qtbot: QtBot, window: MainWindow, store: ConversationStore, db: Path, tiny_models: TinyModels
) -> None:
    load_tiny(qtbot, window, tiny_models)
    window.composer.setPlainText("Keep this question.")
    with locked(db):
        assert window.send() is False
    assert "could not be saved" in _error(window) and "database is locked" in _error(window)
    assert window.composer.toPlainText() == "Keep this question."
    assert list(store.conversations()) == []
    assert not window.generating
    # Once the file is free the same text goes out, and only once.
    with qtbot.waitSignal(window.answers.ended, timeout=60_000):
        assert window.send() is True
    assert window.composer.toPlainText() == ""
    (conversation,) = store.conversations()
    assert [m.content for m in store.messages(conversation.id) if m.role == "user"] == [
        "Keep this question."
    ]


def test_a_reply_in_an_open_conversation_that_cannot_be_saved_is_kept(
    qtbot: QtBot, window: MainWindow, store: ConversationStore, db: Path, tiny_models: TinyModels
) -> None:
    load_tiny(qtbot, window, tiny_models)
    window.composer.setPlainText("First.")
    with qtbot.waitSignal(window.answers.ended, timeout=60_000):
        window.send()
    (conversation,) = store.conversations()
    before = store.messages(conversation.id)
    window.composer.setPlainText("Second.")
    with locked(db):
        assert window.send() is False
    assert "database is locked" in _error(window)
    assert window.composer.toPlainText() == "Second."
    assert store.messages(conversation.id) == before


def test_regenerate_keeps_the_answer_when_it_cannot_be_replaced(
    qtbot: QtBot, window: MainWindow, store: ConversationStore, db: Path, tiny_models: TinyModels
) -> None:
    load_tiny(qtbot, window, tiny_models)
    window.composer.setPlainText("Answer me.")
    with qtbot.waitSignal(window.answers.ended, timeout=60_000):
        window.send()
    (conversation,) = store.conversations()
    before = store.messages(conversation.id)
    with locked(db):
        assert window.regenerate() is False
    assert "could not be replaced" in _error(window)
    assert store.messages(conversation.id) == before
    assert not window.generating


def test_rename_delete_and_undo_that_cannot_be_saved_say_so(
    qtbot: QtBot, window: MainWindow, store: ConversationStore, db: Path
) -> None:
    conversation = store.create("Original title")
    other = store.create("Other")
    conversations = window.conversation_list
    conversations.refresh()

    with locked(db):
        conversations.rename(conversation.id, "New title")
    assert "not renamed" in _error(window) and "database is locked" in _error(window)
    assert store.get(conversation.id).title == "Original title"

    window.banner.hide()
    with locked(db):
        conversations.delete(conversation.id)
    assert "“Original title” was not deleted" in _error(window)
    assert conversation.id in conversations.ids()
    assert not conversations.undo_bar.isVisibleTo(conversations)

    # A deletion that went through, whose Undo is refused: the Undo stays on offer.
    conversations.delete(other.id)
    assert other.id not in conversations.ids()
    window.banner.hide()
    with locked(db):
        assert conversations.undo_delete() is None
    assert "not restored" in _error(window)
    assert conversations.undo_bar.isVisibleTo(conversations)
    assert conversations.undo_delete() == other.id
    assert other.id in conversations.ids()


def test_an_answer_that_cannot_begin_leaves_the_question_for_a_retry(
    qtbot: QtBot, window: MainWindow, store: ConversationStore, db: Path, tiny_models: TinyModels
) -> None:
    conversation = store.create("Unanswered")
    store.add_message(conversation.id, "user", "Still waiting.")
    load_tiny(qtbot, window, tiny_models)
    window.open_conversation(conversation.id)
    before = store.messages(conversation.id)
    with locked(db):
        window.regenerate()
    assert "No answer was started" in _error(window) and "database is locked" in _error(window)
    assert not window.generating
    assert store.messages(conversation.id) == before
    with qtbot.waitSignal(window.answers.ended, timeout=60_000):
        assert window.regenerate() is True
    assert store.messages(conversation.id)[-1].role == "assistant"
