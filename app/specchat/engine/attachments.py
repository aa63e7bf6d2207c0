"""Attached files: reading and decoding them, and writing them into a message for the model."""

from __future__ import annotations

import locale
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from specchat.engine.templates.chat_message import ChatMessage
from specchat.store.attachment_records import Attachment, fence_for

__all__ = [
    "MAX_BYTES",
    "AttachedMessage",
    "Attachment",
    "AttachmentError",
    "attached_message",
    "decode",
    "describe_size",
    "estimate_tokens",
    "read_attachment",
    "with_attachments",
]

#: Largest file attached, in bytes: 1 MB is some 300,000 tokens, far past any context a local
#: model runs with, so a larger file can only be a mistake; what fits is the planner's call.
MAX_BYTES = 1_000_000

#: Bytes read from a file to tell text from binary.
_SNIFF_BYTES = 8192
#: Share of control characters past which decoded "text" is taken for binary.
_MAX_CONTROL_SHARE = 0.01
#: Byte-order marks, longest first (UTF-32's begins with UTF-16's).
_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
)
#: Fence languages for extensions that are not their language's name.
_LANGUAGES = {
    "py": "python",
    "js": "javascript",
    "ts": "typescript",
    "rs": "rust",
    "rb": "ruby",
    "sh": "bash",
    "yml": "yaml",
    "md": "markdown",
    "h": "c",
    "hpp": "cpp",
    "cc": "cpp",
    "txt": "text",
    "log": "text",
}


class AttachmentError(Exception):
    """A file cannot be attached; the message (one line) is meant for the user."""


@dataclass(frozen=True)
class AttachedMessage(ChatMessage):
    """A message whose content holds its attachments, written out for the model.

    Attributes:
        text: what the user typed (content without the attachments).
        attachments: the files, in the order they are written into content.
    """

    text: str = ""
    attachments: tuple[Attachment, ...] = ()

    def bare(self) -> ChatMessage:
        """The message without its attachments (the planner's measure of their share)."""
        return ChatMessage(self.role, self.text)


def describe_size(size: int) -> str:
    """A file size for people: 820 B, 14.2 KB, 1.0 MB."""
    if size < 1000:
        return f"{size} B"
    if size < 1_000_000:
        return f"{size / 1000:.1f} KB"
    return f"{size / 1_000_000:.1f} MB"


def estimate_tokens(text: str) -> int:
    """About how many tokens `text` is before a tokenizer has seen it (code and English run
    3-4 bytes a token in the usual BPE vocabularies)."""
    return (len(text.encode("utf-8")) * 2 + 6) // 7


def decode(data: bytes, name: str) -> tuple[str, str]:
    """The text of `data` and the encoding used: a byte-order mark's, else UTF-8, else the
    locale's. Raises AttachmentError for what looks binary or decodes in neither."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(encoding), encoding
            except UnicodeDecodeError:
                raise AttachmentError(
                    f"{name} starts like {encoding} text but does not decode as it"
                ) from None
    if b"\x00" in data[:_SNIFF_BYTES]:
        raise AttachmentError(
            f"{name} looks binary (it holds NUL bytes): only text files can be attached"
        )
    tried = ["UTF-8"]
    candidates = ["utf-8"]
    preferred = locale.getpreferredencoding(False)
    if preferred and _canonical(preferred) != "utf-8":
        candidates.append(preferred)
        tried.append(preferred)
    for encoding in candidates:
        try:
            text = data.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            continue
        if _mostly_control(text[:_SNIFF_BYTES]):
            raise AttachmentError(
                f"{name} looks binary (control characters): only text files can be attached"
            )
        return text, _canonical(encoding)
    raise AttachmentError(f"{name} is not text in {' or '.join(tried)}: it was not attached")


def read_attachment(path: Path, *, max_bytes: int = MAX_BYTES) -> Attachment:
    """Read a file to attach; raises AttachmentError with a one-line reason when it cannot be."""
    name = path.name or str(path)
    try:
        if path.is_dir():
            raise AttachmentError(f"{name} is a folder: attach the files in it instead")
        size = path.stat().st_size
        if size > max_bytes:
            raise AttachmentError(
                f"{name} is {describe_size(size)}: "
                f"files over {describe_size(max_bytes)} are not attached"
            )
        with path.open("rb") as stream:
            data = stream.read(max_bytes + 1)
    except OSError as error:
        raise AttachmentError(f"cannot read {name}: {error.strerror or error}") from None
    if len(data) > max_bytes:  # grew since stat()
        raise AttachmentError(f"{name} is over {describe_size(max_bytes)}: it was not attached")
    text, encoding = decode(data, name)
    return Attachment(name=name, text=text, encoding=encoding, size=len(data))


def with_attachments(text: str, attachments: Sequence[Attachment]) -> str:
    """A message's content for the model: each file as a fenced block under its name, then
    what the user wrote."""
    blocks = []
    for attachment in attachments:
        fence = fence_for(attachment.text)
        body = attachment.text.rstrip("\n")
        blocks.append(f"{attachment.name}\n{fence}{_language(attachment.name)}\n{body}\n{fence}")
    return "\n\n".join([*blocks, text] if text else blocks)


def attached_message(role: str, text: str, attachments: Sequence[Attachment] = ()) -> ChatMessage:
    """The message the model sees: a plain one without attachments, else an AttachedMessage."""
    if not attachments:
        return ChatMessage(role, text)
    found = tuple(attachments)
    return AttachedMessage(role, with_attachments(text, found), text=text, attachments=found)


def _language(name: str) -> str:
    extension = name.rpartition(".")[2].lower() if "." in name else ""
    if not extension.isalnum() or len(extension) > 10:
        return ""
    return _LANGUAGES.get(extension, extension)


def _canonical(encoding: str) -> str:
    import codecs

    try:
        return codecs.lookup(encoding).name
    except LookupError:
        return encoding


def _mostly_control(text: str) -> bool:
    if not text:
        return False
    control = sum(
        1 for char in text if char not in "\t\n\r\f\v" and unicodedata.category(char) == "Cc"
    )
    return control > len(text) * _MAX_CONTROL_SHARE
