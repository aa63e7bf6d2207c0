"""Conversations and their messages in SQLite (WAL) in the data directory."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from specchat import paths
from specchat.store import attachment_records as attached
from specchat.store.attachment_records import Attachment
from specchat.store.changes import ChangeKind, Listener, StoreChange
from specchat.store.recovery import back_up, move_aside, report
from specchat.store.rows import (
    Conversation,
    StoredMessage,
    TokenSpan,
    conversation_from_row,
    message_from_row,
    spans_json,
)

__all__ = [
    "DB_NAME",
    "SCHEMA_VERSION",
    "Conversation",
    "ConversationStore",
    "PartialWriter",
    "StoreError",
    "StoredMessage",
    "TokenSpan",
]

#: Version of the schema this code writes; older databases are migrated on open.
SCHEMA_VERSION = 2

DB_NAME = "conversations.db"

_SCHEMA = """
CREATE TABLE conversations (
    id INTEGER PRIMARY KEY,
    title TEXT NOT NULL,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    deleted REAL  -- set by delete(), cleared by restore(), purged later
);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    finished INTEGER NOT NULL DEFAULT 1,
    created REAL NOT NULL,
    stats TEXT,        -- JSON object
    token_kinds TEXT   -- JSON list of [text, kind(, thinking tag)] spans (assistant messages)
);
CREATE INDEX messages_by_conversation ON messages(conversation_id, id);
CREATE INDEX conversations_by_update ON conversations(deleted, updated);
"""

#: Statements that take a database from version N-1 to N (index N).
_MIGRATIONS: dict[int, str] = {2: attached.SCHEMA}
#: The tables each version adds: a file whose version cannot be read is read as the last
#: version whose tables, and every earlier one's, are all there (then migrated on).
_VERSION_TABLES: dict[int, set[str]] = {1: {"conversations", "messages"}, 2: {"attachments"}}

#: A conversation in the bin longer than this is purged when the store opens.
DEFAULT_PURGE_AFTER_S = 7 * 24 * 3600.0


#: An answer's token read as thinking (token_kinds' third element).
THINKING = "thinking"
#: A thinking token that is the marker opening or closing it: no text of either part.
THINKING_MARKUP = "markup"


class StoreError(Exception):
    """The conversation database cannot be used; the message is meant for the user."""


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, tz=timezone.utc).isoformat(timespec="seconds")


def _like_pattern(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class ConversationStore:
    """The conversation database; safe to use from the UI thread and a worker at once.

    Every call commits before it returns, so what a call wrote survives a crash right after.
    One connection is shared behind a lock: writes are tiny, and SQLite serialises writers
    anyway, so per-thread connections would only add busy-waiting.

    Attributes:
        path: the database file.
        recovered_from: where a damaged database was moved aside on open, or None.
        recovery: what opening had to recover, for people ("" when nothing); it is also
            written to stderr and to the data folder's log (store/recovery.py).
    """

    def __init__(
        self,
        path: Path | None = None,
        *,
        purge_after_s: float | None = DEFAULT_PURGE_AFTER_S,
        busy_timeout_s: float = 10.0,
    ) -> None:
        self.path = path or paths.data_dir() / DB_NAME
        self._busy_timeout_s = busy_timeout_s
        self.recovered_from: Path | None = None
        self.recovery = ""
        self._lock = threading.RLock()
        self._listeners: list[Listener] = []
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = self._open()
        except sqlite3.DatabaseError as error:
            # Exactly DatabaseError is damage ("file is not a database", "malformed"); its
            # subclasses (a locked file, a bug in a statement) must not cost the user a database.
            if type(error) is not sqlite3.DatabaseError:
                raise StoreError(f"cannot open {self.path}: {error}") from error
            # A damaged file must never keep the app from starting: keep it for the user (or a
            # bug report) and begin a fresh database.
            self.recovered_from = move_aside(self.path)
            self._recovered(
                f"The conversation database was damaged ({error}); it was kept as "
                f"{self.recovered_from} and a new one was started."
            )
            self._db = self._open()
        if purge_after_s is not None:
            self.purge(older_than_s=purge_after_s)

    # --- setup ----------------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        # isolation_level=None: autocommit, transactions only where _transaction() opens one.
        db = sqlite3.connect(
            str(self.path),
            timeout=self._busy_timeout_s,
            isolation_level=None,
            check_same_thread=False,
        )
        try:
            db.row_factory = sqlite3.Row
            mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"SQLite refused WAL mode for {self.path} (got {mode})")
            # NORMAL in WAL mode: a commit survives an application crash (SIGKILL); only a
            # power loss can lose the last transactions, never corrupt the file.
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA foreign_keys=ON")
            self._migrate(db)
            if db.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise sqlite3.DatabaseError("quick_check failed")
        except BaseException:
            db.close()
            raise
        return db

    def _recovered(self, message: str) -> None:
        self.recovery = f"{self.recovery} {message}".strip()
        report(message)

    def _version(self, db: sqlite3.Connection) -> tuple[int, bool]:
        """The schema version the file says it has, and whether it must be written again: a
        version that cannot be read is inferred from the tables there (_VERSION_TABLES),
        once a backup of the file is taken."""
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "schema_version" not in tables:
            return 0, False
        row = db.execute("SELECT version FROM schema_version").fetchone()
        if row is None:
            return 0, False
        with contextlib.suppress(TypeError, ValueError):
            if int(row[0]) >= 0:
                return int(row[0]), False
        assumed = 0
        while assumed + 1 in _VERSION_TABLES and _VERSION_TABLES[assumed + 1] <= tables:
            assumed += 1
        copy = back_up(db, self.path)
        self._recovered(
            f"The conversation database's schema version ({row[0]!r}) could not be read; "
            f"a copy was kept as {copy} and it was read as version {assumed}."
        )
        return assumed, True

    def _migrate(self, db: sqlite3.Connection) -> None:
        version, rewrite = self._version(db)
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path} was written by a newer SpecChat (schema {version}); "
                    "update SpecChat to open it"
                )
            if version == 0:
                db.execute("DELETE FROM schema_version")
                for statement in (_SCHEMA + attached.SCHEMA).split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
            elif version < SCHEMA_VERSION or rewrite:
                for step in range(version + 1, SCHEMA_VERSION + 1):
                    for statement in _MIGRATIONS[step].split(";"):
                        if statement.strip():
                            db.execute(statement)
                db.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION,))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> ConversationStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as error:
                raise StoreError(f"cannot write to {self.path}: {error}") from error
            try:
                yield self._db
                # COMMIT belongs inside the try: a full or busy disk can refuse it, and a
                # transaction left open would make every later write fail.
                self._db.execute("COMMIT")
            except BaseException as error:
                self._rollback()
                if isinstance(error, sqlite3.Error):
                    raise StoreError(f"cannot write to {self.path}: {error}") from error
                raise

    def _rollback(self) -> None:
        # SQLite may already have rolled back on its own (a full disk does); the connection
        # must end up out of the transaction either way.
        if not self._db.in_transaction:
            return
        try:
            self._db.execute("ROLLBACK")
        except sqlite3.Error:
            # A connection that cannot even roll back is replaced: closing it drops the
            # transaction, and the committed data is safe in the file (WAL).
            self._db.close()
            self._db = self._open()

    def subscribe(self, listener: Listener) -> None:
        """Call `listener` after every committed change, on the thread that made it."""
        self._listeners.append(listener)

    def unsubscribe(self, listener: Listener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _notify(self, conversation_id: int, kind: ChangeKind) -> None:
        for listener in list(self._listeners):
            listener(StoreChange(conversation_id, kind))

    # --- conversations --------------------------------------------------------------------

    def create(self, title: str = "New chat") -> Conversation:
        now = time.time()
        with self._transaction() as db:
            cursor = db.execute(
                "INSERT INTO conversations (title, created, updated) VALUES (?, ?, ?)",
                (title, now, now),
            )
            assert cursor.lastrowid is not None
            return Conversation(id=cursor.lastrowid, title=title, created=now, updated=now)

    def get(self, conversation_id: int) -> Conversation:
        with self._lock:
            row = self._db.execute(
                "SELECT * FROM conversations WHERE id = ?", (conversation_id,)
            ).fetchone()
        if row is None:
            raise KeyError(f"no conversation {conversation_id}")
        return conversation_from_row(row)

    def rename(self, conversation_id: int, title: str) -> None:
        with self._transaction() as db:
            self._require(db, conversation_id)
            db.execute(
                "UPDATE conversations SET title = ?, updated = ? WHERE id = ?",
                (title, time.time(), conversation_id),
            )

    def delete(self, conversation_id: int) -> None:
        """Move a conversation to the bin; restore() undoes it until purge() runs."""
        with self._transaction() as db:
            self._require(db, conversation_id)
            db.execute(
                "UPDATE conversations SET deleted = ? WHERE id = ?", (time.time(), conversation_id)
            )
        self._notify(conversation_id, ChangeKind.DELETED)

    def restore(self, conversation_id: int) -> None:
        with self._transaction() as db:
            self._require(db, conversation_id)
            db.execute("UPDATE conversations SET deleted = NULL WHERE id = ?", (conversation_id,))
        self._notify(conversation_id, ChangeKind.RESTORED)

    def purge(self, *, older_than_s: float = 0.0) -> int:
        """Erase conversations in the bin for longer than `older_than_s`; returns how many."""
        cutoff = time.time() - older_than_s
        with self._transaction() as db:
            cursor = db.execute(
                "DELETE FROM conversations WHERE deleted IS NOT NULL AND deleted <= ?", (cutoff,)
            )
            return cursor.rowcount

    def conversations(self, search: str = "", *, deleted: bool = False) -> list[Conversation]:
        """Conversations, most recently updated first, whose title or any message contains
        `search` (case-insensitive for ASCII); `deleted` lists the bin instead."""
        where = "deleted IS NOT NULL" if deleted else "deleted IS NULL"
        params: list[Any] = []
        if search:
            # LIKE rather than FTS5: users type fragments ("specul"), which FTS5's word tokens
            # would miss, and a personal chat history is small enough to scan.
            pattern = _like_pattern(search)
            where += (
                " AND (title LIKE ? ESCAPE '\\' OR EXISTS (SELECT 1 FROM messages m"
                " WHERE m.conversation_id = conversations.id AND m.content LIKE ? ESCAPE '\\'))"
            )
            params += [pattern, pattern]
        with self._lock:
            rows = self._db.execute(
                f"SELECT * FROM conversations WHERE {where} ORDER BY updated DESC, id DESC",
                params,
            ).fetchall()
        return [conversation_from_row(row) for row in rows]

    # --- messages -------------------------------------------------------------------------

    def messages(self, conversation_id: int) -> list[StoredMessage]:
        with self._lock:
            rows = self._db.execute(
                "SELECT * FROM messages WHERE conversation_id = ? ORDER BY id", (conversation_id,)
            ).fetchall()
            found = attached.of_messages(self._db, "m.conversation_id = ?", conversation_id)
        return [message_from_row(row, found.get(row["id"], ())) for row in rows]

    def message(self, message_id: int) -> StoredMessage:
        with self._lock:
            row = self._db.execute("SELECT * FROM messages WHERE id = ?", (message_id,)).fetchone()
            found = attached.of_messages(self._db, "m.id = ?", message_id)
        if row is None:
            raise KeyError(f"no message {message_id}")
        return message_from_row(row, found.get(message_id, ()))

    def add_message(
        self,
        conversation_id: int,
        role: str,
        content: str,
        *,
        stats: Mapping[str, Any] | None = None,
        token_kinds: Sequence[Sequence[str]] | None = None,
        attachments: Sequence[Attachment] = (),
    ) -> StoredMessage:
        """Store a finished message with its attachments; all committed when this returns."""
        return self._insert(conversation_id, role, content, True, stats, token_kinds, attachments)

    def begin_assistant_message(self, conversation_id: int) -> StoredMessage:
        """Store an empty, unfinished answer to be filled by update_partial/finish_message."""
        return self._insert(conversation_id, "assistant", "", False, None, None)

    def update_partial(
        self,
        message_id: int,
        content: str,
        *,
        token_kinds: Sequence[Sequence[str]] | None = None,
    ) -> None:
        """Save the answer so far; it stays marked unfinished."""
        with self._transaction() as db:
            cursor = db.execute(
                "UPDATE messages SET content = ?, token_kinds = COALESCE(?, token_kinds)"
                " WHERE id = ?",
                (content, spans_json(token_kinds), message_id),
            )
            if cursor.rowcount != 1:
                raise KeyError(f"no message {message_id}")

    def finish_message(
        self,
        message_id: int,
        content: str,
        *,
        stats: Mapping[str, Any] | None = None,
        token_kinds: Sequence[Sequence[str]] | None = None,
    ) -> StoredMessage:
        """Save the complete answer and mark it finished."""
        with self._transaction() as db:
            cursor = db.execute(
                "UPDATE messages SET content = ?, finished = 1, stats = ?,"
                " token_kinds = COALESCE(?, token_kinds) WHERE id = ?",
                (
                    content,
                    json.dumps(dict(stats)) if stats is not None else None,
                    spans_json(token_kinds),
                    message_id,
                ),
            )
            if cursor.rowcount != 1:
                raise KeyError(f"no message {message_id}")
            row = db.execute("SELECT * FROM messages WHERE id = ?", (message_id,)).fetchone()
            self._touch(db, row["conversation_id"])
        self._notify(row["conversation_id"], ChangeKind.MESSAGES)
        return message_from_row(row)

    def delete_message(self, message_id: int) -> None:
        """Erase one message (regenerating an answer replaces it); no undo."""
        with self._transaction() as db:
            row = db.execute(
                "SELECT conversation_id FROM messages WHERE id = ?", (message_id,)
            ).fetchone()
            if row is None:
                raise KeyError(f"no message {message_id}")
            db.execute("DELETE FROM messages WHERE id = ?", (message_id,))
            self._touch(db, row["conversation_id"])
        self._notify(row["conversation_id"], ChangeKind.MESSAGES)

    def partial_writer(self, message_id: int, *, interval_s: float = 0.5) -> PartialWriter:
        """A throttle for update_partial, so a fast stream writes at most every `interval_s`."""
        return PartialWriter(self, message_id, interval_s=interval_s)

    def _insert(
        self,
        conversation_id: int,
        role: str,
        content: str,
        finished: bool,
        stats: Mapping[str, Any] | None,
        token_kinds: Sequence[Sequence[str]] | None,
        attachments: Sequence[Attachment] = (),
    ) -> StoredMessage:
        now = time.time()
        with self._transaction() as db:
            self._require(db, conversation_id)
            cursor = db.execute(
                "INSERT INTO messages (conversation_id, role, content, finished, created, stats,"
                " token_kinds) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    conversation_id,
                    role,
                    content,
                    int(finished),
                    now,
                    json.dumps(dict(stats)) if stats is not None else None,
                    spans_json(token_kinds),
                ),
            )
            assert cursor.lastrowid is not None
            attached.insert(db, cursor.lastrowid, attachments)
            self._touch(db, conversation_id, now)
            row = db.execute("SELECT * FROM messages WHERE id = ?", (cursor.lastrowid,)).fetchone()
        self._notify(conversation_id, ChangeKind.MESSAGES)
        return message_from_row(row, tuple(attachments))

    # --- export ---------------------------------------------------------------------------

    def export_markdown(self, conversation_id: int) -> str:
        conversation = self.get(conversation_id)
        lines = [f"# {conversation.title}", "", f"_{_iso(conversation.created)}_", ""]
        for message in self.messages(conversation_id):
            heading = f"**{message.role.capitalize()}**"
            if not message.finished:
                heading += " _(unfinished)_"
            thinking, content = _parts(message)
            if thinking:  # folded, as the window shows it
                lines += [heading, "", "<details><summary>Thinking</summary>", "", thinking]
                lines += ["", "</details>", ""]
            else:
                lines += [heading, ""]
            lines += [content, "", *attached.markdown(message.attachments)]
        return "\n".join(lines).rstrip("\n") + "\n"

    def export_json(self, conversation_id: int) -> str:
        """The conversation as JSON, answers with their per-token kinds ("tokens")."""
        conversation = self.get(conversation_id)
        document = {
            "format": "specchat-conversation",
            "version": 1,
            "title": conversation.title,
            "created": _iso(conversation.created),
            "updated": _iso(conversation.updated),
            "messages": [
                {
                    "role": m.role,
                    "content": _parts(m)[1],
                    "reasoning_content": _parts(m)[0],
                    "finished": m.finished,
                    "created": _iso(m.created),
                    "stats": dict(m.stats) if m.stats is not None else None,
                    "tokens": [list(span) for span in m.token_kinds]
                    if m.token_kinds is not None
                    else None,
                    "attachments": [attached.as_json(a) for a in m.attachments],
                }
                for m in self.messages(conversation_id)
            ],
        }
        return json.dumps(document, ensure_ascii=False, indent=2)

    # --- helpers --------------------------------------------------------------------------

    @staticmethod
    def _require(db: sqlite3.Connection, conversation_id: int) -> None:
        if db.execute("SELECT 1 FROM conversations WHERE id = ?", (conversation_id,)).fetchone():
            return
        raise KeyError(f"no conversation {conversation_id}")

    @staticmethod
    def _touch(db: sqlite3.Connection, conversation_id: int, now: float | None = None) -> None:
        db.execute(
            "UPDATE conversations SET updated = ? WHERE id = ?",
            (time.time() if now is None else now, conversation_id),
        )


class PartialWriter:
    """Saves a streaming answer at most every `interval_s`, then finishes it.

    Attributes:
        message_id: the unfinished message being written.
        interval_s: least time between two saves.
    """

    def __init__(
        self, store: ConversationStore, message_id: int, *, interval_s: float = 0.5
    ) -> None:
        self._store = store
        self.message_id = message_id
        self.interval_s = interval_s
        self._last = float("-inf")

    def update(self, content: str, *, token_kinds: Sequence[Sequence[str]] | None = None) -> bool:
        """Save if the interval has passed; returns whether it saved."""
        now = time.monotonic()
        if now - self._last < self.interval_s:
            return False
        self._store.update_partial(self.message_id, content, token_kinds=token_kinds)
        self._last = now
        return True

    def finish(
        self,
        content: str,
        *,
        stats: Mapping[str, Any] | None = None,
        token_kinds: Sequence[Sequence[str]] | None = None,
    ) -> StoredMessage:
        return self._store.finish_message(
            self.message_id, content, stats=stats, token_kinds=token_kinds
        )


def _parts(message: StoredMessage) -> tuple[str, str]:
    """(thinking, reply) of a stored message; a question is all reply."""
    if message.role != "assistant":
        return "", message.content
    return answer_parts(message.token_kinds, message.content)


def answer_parts(token_kinds: Sequence[Sequence[str]] | None, content: str) -> tuple[str, str]:
    """(thinking, reply) of an answer from its tokens' thinking tags, its markup left out;
    an answer stored without tags is all reply."""
    if not token_kinds or not any(len(span) > 2 and span[2] for span in token_kinds):
        return "", content
    thinking = "".join(span[0] for span in token_kinds if _tag(span) == THINKING)
    reply = "".join(span[0] for span in token_kinds if not _tag(span))
    return thinking.strip("\n"), reply.lstrip("\n")


def _tag(span: Sequence[str]) -> str:
    return span[2] if len(span) > 2 else ""
