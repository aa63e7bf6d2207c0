"""The files attached to the message being written: added, refused, removed (no widgets)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from PySide6.QtCore import QMimeData, QObject, QUrl, Signal

from specchat.engine.attachments import MAX_BYTES, Attachment, AttachmentError, read_attachment


def local_files(mime: QMimeData) -> list[Path]:
    """The files on this computer that `mime` names (a drop, a copied file)."""
    if not mime.hasUrls():
        return []
    return [Path(url.toLocalFile()) for url in mime.urls() if url.isLocalFile()]


class PendingAttachments(QObject):
    """The attachments of the message in the composer, until it is sent.

    Every file is read and decoded when it is added, so a refusal (binary, too large,
    unreadable) is told at once and a sent message never holds a file that changed since.

    Attributes:
        items: the attached files, in the order they were added.
        max_bytes: the largest file attached.

    Signals:
        changed(): the list changed (read `items`).
        refused(str): one or more files were not attached; one line each, for people.
    """

    changed = Signal()
    refused = Signal(str)

    def __init__(self, parent: QObject | None = None, *, max_bytes: int = MAX_BYTES) -> None:
        super().__init__(parent)
        self.max_bytes = max_bytes
        self.items: tuple[Attachment, ...] = ()

    def add_paths(self, paths: Iterable[Path]) -> int:
        """Read and attach each file; returns how many were attached."""
        added: list[Attachment] = []
        problems: list[str] = []
        for path in paths:
            try:
                added.append(read_attachment(Path(path), max_bytes=self.max_bytes))
            except AttachmentError as error:
                problems.append(f"{error}.")
        if added:
            self.items = (*self.items, *added)
            self.changed.emit()
        if problems:
            self.refused.emit("\n".join(problems))
        return len(added)

    def accepts(self, mime: QMimeData) -> bool:
        """Whether `mime` names files to attach (a drop or paste the composer leaves alone)."""
        return bool(local_files(mime))

    def add_mime(self, mime: QMimeData) -> int:
        """Attach the local files `mime` names; a link to elsewhere is refused."""
        remote = [url for url in mime.urls() if not url.isLocalFile()]
        count = self.add_paths(local_files(mime))
        if remote:
            names = ", ".join(
                url.toDisplayString(QUrl.ComponentFormattingOption.FullyDecoded) for url in remote
            )
            self.refused.emit(f"Only files on this computer can be attached, not {names}.")
        return count

    def remove(self, index: int) -> None:
        if 0 <= index < len(self.items):
            self.items = self.items[:index] + self.items[index + 1 :]
            self.changed.emit()

    def clear(self) -> None:
        if self.items:
            self.items = ()
            self.changed.emit()

    def restore(self, attachments: Sequence[Attachment]) -> None:
        """Put back a refused message's attachments (they were read before: no re-reading)."""
        if attachments:
            self.items = (*attachments, *self.items)
            self.changed.emit()
