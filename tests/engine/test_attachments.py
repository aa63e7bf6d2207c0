"""Attached files: decoding, refusals, the prompt's fenced blocks, and the planner's numbers."""

from __future__ import annotations

import locale
import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from specchat.engine.attachments import (
    MAX_BYTES,
    AttachedMessage,
    Attachment,
    AttachmentError,
    attached_message,
    decode,
    estimate_tokens,
    read_attachment,
    with_attachments,
)
from specchat.engine.context import ContextOverflowError, OverflowPolicy, fit_messages
from specchat.engine.templates.chat_template import ChatMessage


def test_utf8_text_is_read_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text("café ✓\nsecond line\n", encoding="utf-8")
    found = read_attachment(path)
    assert found == Attachment("notes.md", "café ✓\nsecond line\n", "utf-8", path.stat().st_size)


def test_the_locales_encoding_is_tried_after_utf8(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(locale, "getpreferredencoding", lambda _do_setlocale=True: "cp1252")
    text, encoding = decode("naïve – “quoted”".encode("cp1252"), "legacy.txt")
    assert (text, encoding) == ("naïve – “quoted”", "cp1252")


def test_text_neither_utf8_nor_the_locales_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(locale, "getpreferredencoding", lambda _do_setlocale=True: "UTF-8")
    with pytest.raises(AttachmentError, match=r"^legacy.txt is not text in UTF-8"):
        decode("naïve".encode("latin-1"), "legacy.txt")


def test_a_byte_order_mark_names_the_encoding() -> None:
    assert decode("hé".encode("utf-16"), "w.txt") == ("hé", "utf-16")
    assert decode("\ufeffhé".encode(), "w.txt") == ("hé", "utf-8-sig")


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "holds NUL bytes"),
        (bytes(range(1, 32)) * 20, "control characters"),
    ],
)
def test_binary_files_are_refused(tmp_path: Path, data: bytes, reason: str) -> None:
    path = tmp_path / "image.png"
    path.write_bytes(data)
    with pytest.raises(AttachmentError, match=f"^image.png looks binary .*{reason}"):
        read_attachment(path)


def test_a_file_over_the_limit_is_refused_with_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    path.write_bytes(b"x" * (MAX_BYTES + 1))
    with pytest.raises(AttachmentError, match=r"^big.log is 1.0 MB: files over 1.0 MB"):
        read_attachment(path)
    path.write_bytes(b"x" * 200)
    with pytest.raises(AttachmentError, match=r"files over 100 B are not attached"):
        read_attachment(path, max_bytes=100)


def test_unreadable_paths_are_refused(tmp_path: Path) -> None:
    with pytest.raises(AttachmentError, match=r"^cannot read gone.txt: No such file"):
        read_attachment(tmp_path / "gone.txt")
    with pytest.raises(AttachmentError, match=r"is a folder"):
        read_attachment(tmp_path)
    if os.name == "posix" and os.geteuid() != 0:
        locked = tmp_path / "locked.txt"
        locked.write_text("secret")
        locked.chmod(0)
        with pytest.raises(AttachmentError, match=r"^cannot read locked.txt: Permission denied"):
            read_attachment(locked)


def test_the_prompt_holds_each_file_fenced_under_its_name_before_the_question() -> None:
    files = [Attachment("a.py", "x = 1\n"), Attachment("notes", "uses ``` inside\n")]
    content = with_attachments("What does it do?", files)
    assert content == (
        "a.py\n```python\nx = 1\n```\n\nnotes\n````\nuses ``` inside\n````\n\nWhat does it do?"
    )
    message = attached_message("user", "What does it do?", files)
    assert isinstance(message, AttachedMessage) and message.content == content
    assert message.bare() == ChatMessage("user", "What does it do?")
    assert attached_message("user", "hi") == ChatMessage("user", "hi")


def test_token_estimate_is_about_three_and_a_half_bytes_a_token() -> None:
    assert estimate_tokens("x" * 700) == 200
    assert estimate_tokens("") == 0


def _count(messages: Sequence[ChatMessage]) -> int:
    return sum(len(m.content) for m in messages)  # a character is a token here


def test_the_planner_refuses_a_message_whose_attachments_cannot_fit_with_numbers() -> None:
    big = Attachment("huge.txt", "y" * 900)
    messages = [
        ChatMessage("system", "be brief"),
        ChatMessage("user", "earlier"),
        ChatMessage("assistant", "ok"),
        attached_message("user", "summarise", [big]),
    ]
    needed = _count([messages[0], messages[3]])
    with pytest.raises(ContextOverflowError) as raised:
        fit_messages(messages, budget=500, count_tokens=_count)
    share = needed - len("be brief") - len("summarise")
    assert str(raised.value) == (
        f"the system prompt and the latest message alone need {needed:,} tokens "
        f"({share:,} of them its attachments) but the context holds 500; "
        "remove an attachment or shorten the message"
    )
    assert raised.value.needed == needed and raised.value.budget == 500
    # What fits is kept whole, its attachments counted: the older turn is dropped.
    kept, plan = fit_messages(messages, budget=needed, count_tokens=_count)
    assert kept == [messages[0], messages[3]] and plan.dropped == (1, 2)
    with pytest.raises(ContextOverflowError, match="needs"):
        fit_messages(messages, budget=needed, count_tokens=_count, policy=OverflowPolicy.REFUSE)


def test_without_attachments_the_refusal_reads_as_before() -> None:
    messages = [ChatMessage("user", "z" * 50)]
    with pytest.raises(ContextOverflowError, match=r"need 50 tokens but .* shorten the message$"):
        fit_messages(messages, budget=10, count_tokens=_count)
