"""A damaged cell or schema version never keeps the store from opening; recovery is said."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from specchat import paths
from specchat.engine.suffix.index import SuffixIndex
from specchat.store import recovery
from specchat.store.conversations import SCHEMA_VERSION, ConversationStore

#: (column, what is written into it): one line per kind of damage.
BAD_CELLS = [
    ("stats", "{not json"),
    ("stats", "[1, 2]"),
    ("stats", b"\xff\xfe"),
    ("token_kinds", '[["a", '),
    ("token_kinds", '{"a": 1}'),
    ("token_kinds", '[["a"]]'),
    ("content", b"\xff\xfe not utf-8"),
    ("created", "yesterday"),
]


@pytest.fixture(autouse=True)
def own_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A data folder of this test's own, so its log holds only what this test caused."""
    monkeypatch.setenv(paths.HOME_ENV, str(tmp_path / "home"))


def chat(path: Path) -> tuple[int, list[int]]:
    """A conversation of three messages; returns its id and the messages' ids."""
    with ConversationStore(path) as store:
        conversation = store.create("c")
        ids = [
            store.add_message(conversation.id, "user", "hello").id,
            store.add_message(
                conversation.id,
                "assistant",
                "hi there",
                stats={"accepted": 3, "drafted": 4},
                token_kinds=[("hi", "ACCEPTED"), (" there", "PLAIN")],
            ).id,
            store.add_message(conversation.id, "user", "and again").id,
        ]
    return conversation.id, ids


def write_cell(path: Path, message_id: int, column: str, value: object) -> None:
    db = sqlite3.connect(path)
    with db:
        db.execute(f"UPDATE messages SET {column} = ? WHERE id = ?", (value, message_id))
    db.close()


def read_cell(path: Path, message_id: int, column: str) -> object:
    db = sqlite3.connect(path)
    try:
        return db.execute(f"SELECT {column} FROM messages WHERE id = ?", (message_id,)).fetchone()[
            0
        ]
    finally:
        db.close()


@pytest.mark.parametrize(("column", "value"), BAD_CELLS)
def test_a_bad_cell_leaves_its_message_damaged_and_the_rest_readable(
    tmp_path: Path, column: str, value: object
) -> None:
    path = tmp_path / "conversations.db"
    conversation, ids = chat(path)
    write_cell(path, ids[1], column, value)
    with ConversationStore(path) as store:
        messages = store.messages(conversation)
        assert [m.damaged for m in messages] == [(), (column,), ()]
        assert "damaged" in messages[1].note
        assert [messages[0].content, messages[2].content] == ["hello", "and again"]
        if column != "content":
            assert messages[1].content == "hi there"
        assert store.message(ids[1]).damaged == (column,)
        assert store.export_json(conversation)
        store.add_message(conversation, "assistant", "still writable")
    assert read_cell(path, ids[1], column) == value  # nothing rewritten


def test_an_unreadable_schema_version_is_backed_up_then_repaired(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "conversations.db"
    conversation, _ids = chat(path)
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE schema_version SET version = 'abc'")
    db.close()
    with ConversationStore(path) as store:
        assert [m.content for m in store.messages(conversation)] == [
            "hello",
            "hi there",
            "and again",
        ]
        assert "schema version ('abc')" in store.recovery
    backups = list(tmp_path.glob("conversations.db.backup-*"))
    assert len(backups) == 1
    copy = sqlite3.connect(backups[0])
    assert copy.execute("SELECT version FROM schema_version").fetchone()[0] == "abc"
    copy.close()
    with ConversationStore(path) as store:
        assert store.recovery == ""  # repaired: the next start has nothing to say
    check = sqlite3.connect(path)
    assert check.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
    check.close()
    said = capfd.readouterr().err
    assert said.count("schema version ('abc') could not be read") == 1
    assert "could not be read" in recovery.log_path().read_text()
    assert recovery.log_path().parent == paths.data_dir()


def test_two_damaged_databases_in_one_second_keep_both_copies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(recovery.time, "strftime", lambda *_: "20260101-000000")
    path = tmp_path / "conversations.db"
    for text in (b"first damaged file", b"second damaged file"):
        path.write_bytes(text * 100)
        with ConversationStore(path) as store:
            assert store.recovered_from is not None
            assert "was damaged" in store.recovery
    copies = sorted(tmp_path.glob("conversations.db.damaged-*"))
    assert sorted(c.read_bytes()[:6] for c in copies) == [b"first ", b"second"]
    said = capfd.readouterr().err
    assert said.count("was damaged") == 2
    assert recovery.log_path().read_text().count("was damaged") == 2


def test_stored_history_reads_past_a_damaged_conversation(tmp_path: Path) -> None:
    from specchat.engine.history import StoredHistory
    from specchat.engine.said import SaidIndex

    path = tmp_path / "conversations.db"
    damaged, ids = chat(path)
    intact, _ = chat(path)
    write_cell(path, ids[1], "token_kinds", "{not json")
    with ConversationStore(path) as store:
        index = SuffixIndex()
        history = StoredHistory(
            store, SaidIndex(index), lambda messages: [len(m.content) for m in messages]
        )
        history.start()
        try:
            assert history.wait_idle(timeout=30)
            assert index.stored() == {damaged, intact}
        finally:
            history.close()


def test_an_unreadable_version_of_an_older_schema_is_migrated_on(tmp_path: Path) -> None:
    """A version-1 file (no attachments table) whose version cell is damaged."""
    path = tmp_path / "conversations.db"
    conversation, _ids = chat(path)
    db = sqlite3.connect(path)
    with db:
        db.execute("DROP TABLE attachments")
        db.execute("UPDATE schema_version SET version = 'one'")
    db.close()
    with ConversationStore(path) as store:
        assert "read as version 1" in store.recovery
        assert len(store.messages(conversation)) == 3
        store.add_message(conversation, "user", "with the attachments table back")
    check = sqlite3.connect(path)
    tables = {r[0] for r in check.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "attachments" in tables
    assert check.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
    check.close()
