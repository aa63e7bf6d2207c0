"""Files attached to a message: the value kept with it, and its table in the conversation store."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

#: The table and index; part of the conversation store's schema from version 2.
SCHEMA = """
CREATE TABLE attachments (
    id INTEGER PRIMARY KEY,
    message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,  -- order within the message
    name TEXT NOT NULL,
    text TEXT NOT NULL,
    encoding TEXT NOT NULL,
    size INTEGER NOT NULL
);
CREATE INDEX attachments_by_message ON attachments(message_id, position);
"""


@dataclass(frozen=True)
class Attachment:
    """A text file attached to a message.

    Attributes:
        name: the file's name (no folder), as shown and as written into the prompt.
        text: its decoded text.
        encoding: the encoding the bytes were decoded with ("utf-8", "cp1252", ...).
        size: the file's size in bytes.
    """

    name: str
    text: str
    encoding: str = "utf-8"
    size: int = 0


def insert(db: sqlite3.Connection, message_id: int, attachments: Sequence[Attachment]) -> None:
    """Write a message's attachments (inside the caller's transaction)."""
    db.executemany(
        "INSERT INTO attachments (message_id, position, name, text, encoding, size)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        [
            (message_id, position, a.name, a.text, a.encoding, a.size)
            for position, a in enumerate(attachments)
        ],
    )


def of_messages(
    db: sqlite3.Connection, where: str, param: int
) -> dict[int, tuple[Attachment, ...]]:
    """Attachments by message id, for the messages `where` selects ("m.id = ?" or
    "m.conversation_id = ?")."""
    rows = db.execute(
        "SELECT a.* FROM attachments a JOIN messages m ON m.id = a.message_id"
        f" WHERE {where} ORDER BY a.message_id, a.position",
        (param,),
    ).fetchall()
    found: dict[int, list[Attachment]] = {}
    for row in rows:
        name, text, encoding, size = row["name"], row["text"], row["encoding"], row["size"]
        # A damaged cell costs that attachment, never its message or conversation.
        if not all(isinstance(v, str) for v in (name, text, encoding)) or not isinstance(size, int):
            continue
        found.setdefault(int(row["message_id"]), []).append(Attachment(name, text, encoding, size))
    return {key: tuple(value) for key, value in found.items()}


def as_json(attachment: Attachment) -> dict[str, object]:
    """An attachment in the JSON export."""
    return {
        "name": attachment.name,
        "text": attachment.text,
        "encoding": attachment.encoding,
        "size": attachment.size,
    }


def markdown(attachments: Sequence[Attachment]) -> list[str]:
    """Lines of a Markdown export: each attachment as a fenced block under its name."""
    lines: list[str] = []
    for a in attachments:
        fence = fence_for(a.text)
        lines += [f"_Attached: {a.name} ({a.size:,} bytes, {a.encoding})_", "", fence]
        lines += [a.text.rstrip("\n"), fence, ""]
    return lines


def fence_for(text: str) -> str:
    """A backtick fence longer than any run of backticks in `text`, so the block holds it."""
    longest = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)
