"""The window opens over a database with damaged cells, the last conversation among them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from specchat import settings as cfg
from specchat.settings import Settings
from specchat.store.conversations import ConversationStore
from specchat.ui.window.main_window import MainWindow


@pytest.mark.parametrize(
    ("column", "value"),
    [("stats", "{oops"), ("token_kinds", "[[1, 2"), ("stats", '{"accepted": "many"}')],
)
def test_the_window_opens_on_a_conversation_with_a_damaged_message(
    qtbot: QtBot, home: Path, column: str, value: str
) -> None:
    with ConversationStore() as store:
        path = store.path
        other = store.create("other")
        store.add_message(other.id, "user", "another chat")
        last = store.create("last")
        store.add_message(last.id, "user", "first question")
        answer = store.add_message(
            last.id, "assistant", "a stored answer", stats={"accepted": 1, "drafted": 2}
        )
        store.add_message(last.id, "user", "second question")
    settings = Settings()
    settings.set(cfg.LAST_CONVERSATION, last.id)
    db = sqlite3.connect(path)
    with db:
        db.execute(f"UPDATE messages SET {column} = ? WHERE id = ?", (value, answer.id))
        db.execute("UPDATE schema_version SET version = 'abc'")
    db.close()

    store = ConversationStore()
    window = MainWindow(settings=settings, store=store, autoload=False, n_threads=1)
    qtbot.addWidget(window)
    try:
        shown = window.chat_view.toPlainText()
        for text in ("first question", "a stored answer", "second question"):
            assert text in shown
        damaged = column in ("token_kinds",) or value.startswith("{oops")
        assert ("damaged" in shown) == damaged
        assert "schema version" in store.recovery
        window.open_conversation(other.id)
        assert "another chat" in window.chat_view.toPlainText()
    finally:
        window.close()
        window.service.worker_thread.wait(30_000)
        store.close()
