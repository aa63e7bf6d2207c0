"""Conversation store: CRUD, bin and undo, search, partial answers, export, crash safety."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from specchat import paths
from specchat.store.conversations import DB_NAME, SCHEMA_VERSION, ConversationStore, StoreError


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ConversationStore]:
    db = ConversationStore(tmp_path / "conversations.db")
    yield db
    db.close()


def test_default_path_is_in_the_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(paths.HOME_ENV, str(tmp_path))
    with ConversationStore() as db:
        assert db.path == paths.data_dir() / DB_NAME
        assert db.path.exists()


def test_wal_mode_and_schema_version(store: ConversationStore) -> None:
    raw = sqlite3.connect(store.path)
    try:
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert raw.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
    finally:
        raw.close()


def test_create_rename_list_and_messages(store: ConversationStore) -> None:
    first = store.create("First")
    second = store.create()
    assert second.title == "New chat"
    store.add_message(first.id, "user", "Hello there")
    # The conversation touched last comes first.
    assert [c.id for c in store.conversations()] == [first.id, second.id]
    store.rename(second.id, "Renamed")
    assert store.get(second.id).title == "Renamed"
    assert store.get(second.id).updated >= store.get(second.id).created
    messages = store.messages(first.id)
    assert [(m.role, m.content, m.finished) for m in messages] == [("user", "Hello there", True)]
    with pytest.raises(KeyError):
        store.rename(999, "x")
    with pytest.raises(KeyError):
        store.add_message(999, "user", "x")


def test_delete_undo_and_purge(store: ConversationStore) -> None:
    keep = store.create("keep")
    gone = store.create("gone")
    store.add_message(gone.id, "user", "bye")
    store.delete(gone.id)
    assert [c.id for c in store.conversations()] == [keep.id]
    assert [c.id for c in store.conversations(deleted=True)] == [gone.id]
    store.restore(gone.id)
    assert {c.id for c in store.conversations()} == {keep.id, gone.id}
    assert store.messages(gone.id)[0].content == "bye"
    store.delete(gone.id)
    assert store.purge(older_than_s=3600) == 0  # still undoable
    assert store.purge() == 1
    with pytest.raises(KeyError):
        store.get(gone.id)
    assert store.messages(gone.id) == []  # messages went with it


def test_old_bin_is_purged_on_open(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with ConversationStore(path) as db:
        old = db.create("old")
        db.delete(old.id)
    with ConversationStore(path, purge_after_s=3600) as db:
        assert db.conversations(deleted=True) != []
    with ConversationStore(path, purge_after_s=0) as db:
        assert db.conversations(deleted=True) == []


def test_search_titles_and_content(store: ConversationStore) -> None:
    tea = store.create("Tea")
    code = store.create("Code review")
    store.add_message(code.id, "assistant", "Speculative decoding keeps the target exact.")
    store.add_message(tea.id, "user", "Green or black, 100% sure?")
    assert [c.id for c in store.conversations("tea")] == [tea.id]
    assert [c.id for c in store.conversations("SPECUL")] == [code.id]
    assert [c.id for c in store.conversations("100%")] == [tea.id]
    assert store.conversations("_") == []  # LIKE wildcards are matched literally
    assert store.conversations("nothing like it") == []
    store.delete(tea.id)
    assert store.conversations("tea") == []


def test_partial_answer_is_kept_unfinished(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with ConversationStore(path) as db:
        chat = db.create("t")
        db.add_message(chat.id, "user", "Count")
        answer = db.begin_assistant_message(chat.id)
        assert not answer.finished
        db.update_partial(
            answer.id, "one, two", token_kinds=[["one", "accepted"], [", two", "bonus"]]
        )
    # A new process (here: a new store) sees what was saved, marked unfinished.
    with ConversationStore(path) as db:
        saved = db.messages(chat.id)[-1]
        assert saved.content == "one, two"
        assert not saved.finished
        assert saved.token_kinds == (("one", "accepted"), (", two", "bonus"))
        done = db.finish_message(answer.id, "one, two, three", stats={"alpha": 0.75})
        assert done.finished
        assert done.stats == {"alpha": 0.75}
        assert done.token_kinds == (("one", "accepted"), (", two", "bonus"))  # kept


def test_partial_writer_throttles(store: ConversationStore) -> None:
    chat = store.create()
    answer = store.begin_assistant_message(chat.id)
    writer = store.partial_writer(answer.id, interval_s=3600)
    assert writer.update("a")
    assert not writer.update("ab")  # within the interval: not written
    assert store.message(answer.id).content == "a"
    writer.finish("abc", token_kinds=[["abc", "plain"]])
    assert store.message(answer.id).content == "abc"
    assert store.message(answer.id).finished


def test_export_markdown_and_json(store: ConversationStore) -> None:
    chat = store.create("Export me")
    store.add_message(chat.id, "user", "Say hi")
    answer = store.begin_assistant_message(chat.id)
    spans = [["Hi", "accepted"], [" there", "corrected"], ["!", "bonus"]]
    store.finish_message(answer.id, "Hi there!", stats={"tokens_per_s": 42.0}, token_kinds=spans)
    cut = store.begin_assistant_message(chat.id)
    store.update_partial(cut.id, "Half", token_kinds=[["Half", "plain"]])

    markdown = store.export_markdown(chat.id)
    assert markdown.startswith("# Export me\n")
    assert "**User**\n\nSay hi\n" in markdown
    assert "**Assistant**\n\nHi there!\n" in markdown
    assert "**Assistant** _(unfinished)_\n\nHalf\n" in markdown

    document = json.loads(store.export_json(chat.id))
    assert document["format"] == "specchat-conversation"
    assert document["title"] == "Export me"
    roles = [(m["role"], m["content"], m["finished"]) for m in document["messages"]]
    assert roles == [
        ("user", "Say hi", True),
        ("assistant", "Hi there!", True),
        ("assistant", "Half", False),
    ]
    assert document["messages"][1]["tokens"] == spans
    assert document["messages"][1]["stats"] == {"tokens_per_s": 42.0}
    assert document["messages"][0]["tokens"] is None


def test_two_threads_write_at_once(store: ConversationStore) -> None:
    chat = store.create()
    answer = store.begin_assistant_message(chat.id)
    failures: list[BaseException] = []

    def stream() -> None:
        try:
            for i in range(200):
                store.update_partial(answer.id, "x" * i)
        except BaseException as error:  # reported to the test thread
            failures.append(error)

    worker = threading.Thread(target=stream)
    worker.start()
    for i in range(100):
        store.add_message(store.create(f"c{i}").id, "user", "hi")
        store.conversations("c")
    worker.join(timeout=30)
    assert not worker.is_alive()
    assert failures == []
    assert store.message(answer.id).content == "x" * 199
    assert len(store.conversations()) == 101


def test_damaged_database_is_moved_aside(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    path.write_bytes(b"this is not a database" * 100)
    with ConversationStore(path) as db:
        assert db.recovered_from is not None
        assert db.recovered_from.read_bytes().startswith(b"this is not")
        assert db.conversations() == []
        db.create("fresh")


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    ConversationStore(path).close()
    raw = sqlite3.connect(path)
    raw.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    raw.commit()
    raw.close()
    with pytest.raises(StoreError, match="newer SpecChat"):
        ConversationStore(path)


FULL_DISK = textwrap.dedent(
    """
    import os, resource, signal, sys
    from pathlib import Path
    from specchat.store.conversations import ConversationStore, StoreError

    # A file limit makes the disk "full" for this process alone; EFBIG instead of a signal.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    path = Path(sys.argv[1])
    store = ConversationStore(path)
    chat = store.create("kept")
    store.add_message(chat.id, "user", "before the disk filled up")
    answer = store.begin_assistant_message(chat.id)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    wal = Path(str(path) + "-wal")
    resource.setrlimit(resource.RLIMIT_FSIZE, (wal.stat().st_size + 8192, hard))
    try:
        # In WAL mode the pages reach the disk at COMMIT: this is the commit that fails.
        store.update_partial(answer.id, "x" * 400_000)
    except StoreError as error:
        print("refused:", error)
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    store.update_partial(answer.id, "after the disk had room again")
    store.finish_message(answer.id, "done")
    print("messages:", [m.content for m in store.messages(chat.id)])
    """
)


def test_full_disk_at_commit_is_reported_and_later_writes_work(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", FULL_DISK, str(tmp_path / "c.db")],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert result.returncode == 0, result.stderr
    assert "refused: cannot write to" in result.stdout
    assert "messages: ['before the disk filled up', 'done']" in result.stdout


def test_locked_file_is_reported_and_the_store_recovers(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with ConversationStore(path, busy_timeout_s=0.2) as store:
        chat = store.create("kept")
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN EXCLUSIVE")  # another process holding the write lock
        try:
            with pytest.raises(StoreError, match="database is locked"):
                store.add_message(chat.id, "user", "while locked")
        finally:
            other.execute("ROLLBACK")
            other.close()
        store.add_message(chat.id, "user", "after the lock")
        assert [m.content for m in store.messages(chat.id)] == ["after the lock"]


def test_refused_commit_does_not_leave_the_store_in_a_transaction(
    store: ConversationStore,
) -> None:
    chat = store.create("kept")
    store.add_message(chat.id, "user", "first")

    # SQLite keeps a transaction open when COMMIT itself is refused (as it is for a busy
    # database); an authorizer that refuses COMMIT gets exactly that state from real SQLite.
    def refuse_commit(action: int, arg1: str | None, *_: object) -> int:
        if action == sqlite3.SQLITE_TRANSACTION and arg1 == "COMMIT":
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    store._db.set_authorizer(refuse_commit)
    with pytest.raises(StoreError, match="cannot write to"):
        store.add_message(chat.id, "user", "refused")
    store._db.set_authorizer(None)
    store.add_message(chat.id, "user", "second")
    assert [m.content for m in store.messages(chat.id)] == ["first", "second"]


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from specchat.store.conversations import ConversationStore

    store = ConversationStore(Path(sys.argv[1]))
    chat = store.create("crash")
    for i in range(int(sys.argv[2])):
        store.add_message(chat.id, "user", f"question {i}")
        answer = store.begin_assistant_message(chat.id)
        store.update_partial(answer.id, f"answer {i} partial", token_kinds=[["a", "plain"]])
        store.finish_message(answer.id, f"answer {i}", stats={"i": i}, token_kinds=[["a", "bonus"]])
        print(f"finished {i}", flush=True)
    store.add_message(chat.id, "user", "last question")
    answer = store.begin_assistant_message(chat.id)
    print("streaming", flush=True)
    text = ""
    while True:  # mid-answer until SIGKILL
        text += "word "
        store.update_partial(answer.id, text, token_kinds=[[text, "accepted"]])
    """
)


@pytest.mark.parametrize("finished_before_kill", [3, 25])
def test_sigkill_mid_answer_keeps_every_finished_message(
    tmp_path: Path, finished_before_kill: int
) -> None:
    path = tmp_path / "c.db"
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(finished_before_kill)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        confirmed = []
        for line in child.stdout:
            if line.startswith("finished"):
                confirmed.append(int(line.split()[1]))
            if line.startswith("streaming"):
                break
        time.sleep(0.3)  # let it stream partial updates, then kill it mid-write
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if child.stdout is not None:
            child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    assert confirmed == list(range(finished_before_kill))

    with ConversationStore(path) as db:
        raw = sqlite3.connect(path)
        try:
            assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        finally:
            raw.close()
        (chat,) = db.conversations()
        messages = db.messages(chat.id)
        finished = [m for m in messages if m.finished]
        expected = []
        for i in range(finished_before_kill):
            expected += [("user", f"question {i}"), ("assistant", f"answer {i}")]
        expected.append(("user", "last question"))
        assert [(m.role, m.content) for m in finished] == expected
        assert all(m.stats == {"i": i} for i, m in enumerate(finished[1::2]))
        # The interrupted answer is there, unfinished, with what was saved of it.
        last = messages[-1]
        assert last.role == "assistant"
        assert not last.finished
        assert last.content.startswith("word ")
        assert last.token_kinds == ((last.content, "accepted"),)
        db.add_message(chat.id, "user", "still works")


def test_store_does_not_import_qt() -> None:
    code = "import sys, specchat.store.conversations; assert 'PySide6' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_exports_keep_an_answers_thinking_apart(store: ConversationStore) -> None:
    chat = store.create("Thinking")
    store.add_message(chat.id, "user", "Is 91 prime?")
    # as the window stores it: the model's text, each token's thinking tag (the reader's)
    tokens = [
        ["<think>", "PLAIN", "markup"],
        ["\n91 = 7 × 13\n", "ACCEPTED", "thinking"],
        ["</think>", "PLAIN", "markup"],
        ["\n\n", "PLAIN"],
        ["No.", "BONUS"],
    ]
    content = "".join(t[0] for t in tokens)
    store.add_message(chat.id, "assistant", content, token_kinds=tokens)
    store.add_message(chat.id, "assistant", "Old <think>x</think>.")  # no tags: all reply
    markdown = store.export_markdown(chat.id)
    assert "<details><summary>Thinking</summary>\n\n91 = 7 × 13\n\n</details>" in markdown
    assert "<think>\n" not in markdown and "\nNo.\n" in markdown
    assert "\nOld <think>x</think>.\n" in markdown
    document = json.loads(store.export_json(chat.id))
    answer = document["messages"][1]
    assert (answer["reasoning_content"], answer["content"]) == ("91 = 7 × 13", "No.")
    assert answer["tokens"][1] == ["\n91 = 7 × 13\n", "ACCEPTED", "thinking"]
    old = document["messages"][2]
    assert (old["reasoning_content"], old["content"]) == ("", "Old <think>x</think>.")
    question = json.loads(store.export_json(chat.id))["messages"][0]
    assert (question["reasoning_content"], question["content"]) == ("", "Is 91 prime?")
