"""What the UI and the download worker send each other: requests and frozen payloads."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from specchat.models.transfer import DownloadProgress

# --- requests (UI → worker) ----------------------------------------------------------------


@dataclass(frozen=True)
class FetchRequest:
    """Make a catalog pair's files present and verified.

    Attributes:
        pair_id: the catalog id.
        source: "auto" (hub, falling back to the mirror), "hub" or "mirror".
    """

    pair_id: str
    source: str = "auto"


@dataclass(frozen=True)
class LocalCheckRequest:
    """Check files on disk before they become a custom pair.

    Attributes:
        target: the target GGUF.
        draft: the draft GGUF, or None (prompt lookup only).
    """

    target: Path
    draft: Path | None


# --- payloads (worker → UI) ----------------------------------------------------------------


@dataclass(frozen=True)
class FileProgress(DownloadProgress):
    """How far one file of a pair has come: a DownloadProgress that names its pair and role.

    Attributes:
        pair_id: the pair being fetched.
        role: "target" or "draft".
    """

    pair_id: str = field(default="", kw_only=True)
    role: str = field(default="", kw_only=True)


@dataclass(frozen=True)
class FileCheck:
    """One file of a finished fetch and its checksum result.

    Attributes:
        role: "target" or "draft".
        path: where the file is.
        sha256: the verified sha256, or None when no reference hash was known.
    """

    role: str
    path: Path
    sha256: str | None


@dataclass(frozen=True)
class PairFetched:
    """Every file of a pair is present and verified.

    Attributes:
        pair_id: the pair.
        target: the target file.
        draft: the draft file, or None when the target's own MTP head drafts.
        checks: the checksum result of each file.
    """

    pair_id: str
    target: Path
    draft: Path | None
    checks: tuple[FileCheck, ...]


@dataclass(frozen=True)
class FetchFailed:
    """A fetch that failed; whatever was downloaded is kept for the next try.

    Attributes:
        pair_id: the pair.
        message: for people, one or two sentences.
        no_space: the disk cannot hold it (a retry will not help until space is freed).
    """

    pair_id: str
    message: str
    no_space: bool = False


@dataclass(frozen=True)
class FetchCancelled:
    """The user cancelled a fetch; partial files are kept until discarded.

    Attributes:
        pair_id: the pair.
        kept: bytes of interrupted hub downloads kept on disk for resume.
    """

    pair_id: str
    kept: int


@dataclass(frozen=True)
class FileStatus:
    """What is on disk for one file of a catalog pair.

    Attributes:
        role: "target" or "draft".
        filename: the file name.
        size: expected bytes (catalog, mirror or hub), or None when unknown.
        path: where the file is, or None when absent.
        source: "hub" or "mirror" when present.
        verified: a stamp records a sha256 matching the expected one.
        partial: bytes of an interrupted download kept for resume (0 = none).
    """

    role: str
    filename: str
    size: int | None
    path: Path | None = None
    source: str | None = None
    verified: bool = False
    partial: int = 0

    @property
    def present(self) -> bool:
        return self.path is not None


@dataclass(frozen=True)
class PairStatus:
    """What is on disk for a catalog pair, and whether its drafter suits its target.

    Attributes:
        pair_id: the pair.
        target: the target file's status.
        draft: the draft file's status, or None when the target's own MTP head drafts.
        compatible: the verdict when every file is present, else None.
        reason: the verdict's reason for people ("" when not checked).
        damaged: a file is there but is no usable GGUF (truncated, not a model): not ready.
    """

    pair_id: str
    target: FileStatus
    draft: FileStatus | None
    compatible: bool | None = None
    reason: str = ""
    damaged: bool = False

    @property
    def files(self) -> tuple[FileStatus, ...]:
        """The pair's files: the target, then the draft file if the pair has one."""
        return (self.target,) if self.draft is None else (self.target, self.draft)

    @property
    def present(self) -> bool:
        """Every file of the pair is on disk."""
        return all(file.present for file in self.files)

    @property
    def verified(self) -> bool:
        """Every file's stamp records the expected sha256."""
        return all(file.verified for file in self.files)

    @property
    def ready(self) -> bool:
        return self.present and self.compatible is not False

    @property
    def partial(self) -> int:
        return sum(file.partial for file in self.files)


@dataclass(frozen=True)
class LocalChecked:
    """The verdict on files from disk.

    Attributes:
        target: the target GGUF.
        draft: the draft GGUF, or None.
        ok: usable as a pair.
        reason: why not (or a short confirmation), for people.
    """

    target: Path
    draft: Path | None
    ok: bool
    reason: str
