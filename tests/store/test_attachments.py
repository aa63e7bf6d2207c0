"""Attachments kept with their message: one commit, the schema migration, erasing, export."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from specchat.store.attachment_records import Attachment
from specchat.store.conversations import SCHEMA_VERSION, ConversationStore, StoreError

FILES = (
    Attachment("inventory.py", "def add(a, b):\n    return a + b\n", "utf-8", 33),
    Attachment("notes.txt", "caf\u00e9 ```fenced```\n", "cp1252", 19),
)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ConversationStore]:
    with ConversationStore(tmp_path / "chats.db") as opened:
        yield opened


def test_a_message_keeps_its_attachments_in_order(store: ConversationStore) -> None:
    chat = store.create("c")
    added = store.add_message(chat.id, "user", "add logging", attachments=FILES)
    store.add_message(chat.id, "assistant", "done")
    assert added.attachments == FILES
    assert [m.attachments for m in store.messages(chat.id)] == [FILES, ()]
    assert store.message(added.id).attachments == FILES


def test_the_message_and_its_attachments_are_one_commit(store: ConversationStore) -> None:
    chat = store.create("c")
    store.add_message(chat.id, "user", "first")
    # A failing attachment insert (a NULL name) must take the message with it.
    broken = Attachment(None, "text")  # type: ignore[arg-type]
    with pytest.raises(StoreError):
        store.add_message(chat.id, "user", "lost", attachments=(FILES[0], broken))
    assert [m.content for m in store.messages(chat.id)] == ["first"]
    raw = sqlite3.connect(store.path)
    assert raw.execute("SELECT COUNT(*) FROM attachments").fetchone() == (0,)
    raw.close()


def test_erasing_a_message_or_purging_its_conversation_erases_its_attachments(
    store: ConversationStore,
) -> None:
    chat = store.create("c")
    message = store.add_message(chat.id, "user", "q", attachments=FILES)
    other = store.create("d")
    store.add_message(other.id, "user", "q", attachments=FILES[:1])
    store.delete_message(message.id)
    store.delete(other.id)
    store.purge()
    raw = sqlite3.connect(store.path)
    assert raw.execute("SELECT COUNT(*) FROM attachments").fetchone() == (0,)
    raw.close()


def test_a_version_1_database_gains_the_attachments_table(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    raw = sqlite3.connect(path)
    raw.executescript(
        """
        CREATE TABLE schema_version (version INTEGER NOT NULL);
        INSERT INTO schema_version VALUES (1);
        CREATE TABLE conversations (id INTEGER PRIMARY KEY, title TEXT NOT NULL,
            created REAL NOT NULL, updated REAL NOT NULL, deleted REAL);
        CREATE TABLE messages (id INTEGER PRIMARY KEY,
            conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
            role TEXT NOT NULL, content TEXT NOT NULL, finished INTEGER NOT NULL DEFAULT 1,
            created REAL NOT NULL, stats TEXT, token_kinds TEXT);
        INSERT INTO conversations VALUES (1, 'old', 1.0, 1.0, NULL);
        INSERT INTO messages VALUES (1, 1, 'user', 'kept', 1, 1.0, NULL, NULL);
        """
    )
    raw.close()
    with ConversationStore(path, purge_after_s=None) as store:
        assert [(m.content, m.attachments) for m in store.messages(1)] == [("kept", ())]
        store.add_message(1, "user", "new", attachments=FILES[:1])
        assert store.messages(1)[-1].attachments == FILES[:1]
        assert store.recovered_from is None
    raw = sqlite3.connect(path)
    assert raw.execute("SELECT version FROM schema_version").fetchone() == (SCHEMA_VERSION,)
    raw.close()


def test_exports_carry_the_attachments(store: ConversationStore) -> None:
    chat = store.create("c")
    store.add_message(chat.id, "user", "add logging", attachments=FILES)
    markdown = store.export_markdown(chat.id)
    assert "_Attached: inventory.py (33 bytes, utf-8)_\n\n```\ndef add(a, b):" in markdown
    # A fence longer than the backticks the file holds.
    assert "````\ncaf\u00e9 ```fenced```\n````" in markdown
    document = json.loads(store.export_json(chat.id))
    assert document["messages"][0]["attachments"] == [
        {"name": "inventory.py", "text": FILES[0].text, "encoding": "utf-8", "size": 33},
        {"name": "notes.txt", "text": FILES[1].text, "encoding": "cp1252", "size": 19},
    ]
