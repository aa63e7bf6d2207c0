"""The store's rows as values: conversations and messages, a damaged cell read as damaged."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specchat.store.attachment_records import Attachment

#: [text, kind] or [text, kind, thinking tag] (conversations.THINKING, THINKING_MARKUP): an
#: answer's token; rows stored before the tag have two elements.
TokenSpan = tuple[str, ...]

#: What each column that can be damaged holds, for people ("its statistics").
_COLUMN_NAMES = {
    "content": "its text",
    "stats": "its statistics",
    "token_kinds": "how its tokens were made",
    "created": "its date",
    "role": "its role",
}


@dataclass(frozen=True)
class Conversation:
    """One conversation's header.

    Attributes:
        id: database id.
        title: shown in the conversation list.
        created, updated: Unix times.
        deleted: Unix time it was moved to the bin, or None.
    """

    id: int
    title: str
    created: float
    updated: float
    deleted: float | None = None


@dataclass(frozen=True)
class StoredMessage:
    """One stored message.

    Attributes:
        id: database id.
        conversation_id: the conversation it belongs to.
        role: "system", "user", "assistant" or "tool".
        content: the text (for an unfinished answer, as much as was saved).
        finished: False for an answer still streaming, or cut off by a crash or a stop.
        created: Unix time.
        stats: generation statistics (acceptance rate, tokens/s …), or None.
        token_kinds: the answer as (text, kind[, thinking tag]) spans, kind being how each
            token was made.
        damaged: the columns whose cells could not be read (left as they are in the file;
            the message is read without them).
        attachments: files attached to the message, in order.
    """

    id: int
    conversation_id: int
    role: str
    content: str
    finished: bool
    created: float
    stats: Mapping[str, Any] | None = None
    token_kinds: tuple[TokenSpan, ...] | None = None
    damaged: tuple[str, ...] = ()
    attachments: tuple[Attachment, ...] = ()

    @property
    def note(self) -> str:
        """What the transcript says about this message beside its text, or ""."""
        notes = [] if self.finished else ["unfinished"]
        if self.damaged:
            lost = ", ".join(_COLUMN_NAMES.get(c, c) for c in self.damaged)
            notes.append(f"damaged: {lost} could not be read")
        return "; ".join(notes)


def spans_json(token_kinds: Sequence[Sequence[str]] | None) -> str | None:
    if token_kinds is None:
        return None
    return json.dumps([[str(part) for part in span] for span in token_kinds], ensure_ascii=False)


def conversation_from_row(row: sqlite3.Row) -> Conversation:
    return Conversation(
        id=row["id"],
        title=str(row["title"]),
        created=_number_or(row["created"], 0.0) or 0.0,
        updated=_number_or(row["updated"], 0.0) or 0.0,
        deleted=_number_or(row["deleted"], None),
    )


def _number_or(value: Any, default: float | None) -> float | None:
    try:
        return _number(value)
    except ValueError:
        return default


def message_from_row(row: sqlite3.Row, attachments: tuple[Attachment, ...] = ()) -> StoredMessage:
    """The message in `row` with its `attachments`; a cell that cannot be read is left out and
    named in `damaged`, so that one bad cell never keeps a conversation (or the app) from
    opening."""
    damaged: list[str] = []

    def read(column: str, decode: Any, default: Any) -> Any:
        value = row[column]
        if value is None:
            return default
        try:
            return decode(value)
        except (ValueError, TypeError, UnicodeDecodeError):
            damaged.append(column)
            return default

    message = StoredMessage(
        id=row["id"],
        conversation_id=row["conversation_id"],
        role=read("role", _text, "assistant"),
        content=read("content", _text, ""),
        finished=bool(row["finished"]),
        created=read("created", _seconds, 0.0),
        stats=read("stats", _stats, None),
        token_kinds=read("token_kinds", _token_kinds, None),
        attachments=attachments,
    )
    if not damaged:
        return message
    return StoredMessage(**{**message.__dict__, "damaged": tuple(damaged)})


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if not isinstance(value, str):
        raise TypeError(f"not text: {type(value).__name__}")
    return value


def _seconds(value: Any) -> float:
    number = _number(value)
    if number is None:
        raise ValueError("not a time")
    return number


def _number(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise ValueError(f"not a number: {value!r}")


def _stats(value: Any) -> Mapping[str, Any]:
    stats = json.loads(_text(value))
    if not isinstance(stats, dict):
        raise ValueError("stats are not a JSON object")
    return stats


def _token_kinds(value: Any) -> tuple[TokenSpan, ...]:
    spans = json.loads(_text(value))
    if not isinstance(spans, list):
        raise ValueError("token kinds are not a JSON list")
    read: list[TokenSpan] = []
    for span in spans:
        sized = isinstance(span, list) and len(span) in (2, 3)
        if not (sized and all(isinstance(part, str) for part in span)):
            raise ValueError("a token span is not [text, kind] or [text, kind, tag]")
        read.append(tuple(span))
    return tuple(read)
