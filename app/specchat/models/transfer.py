"""What hub and mirror downloads share: progress events, errors, hashing, disk-space checks."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from specchat import paths

#: Bytes hashed or copied per read; large enough to keep Python overhead out of the way.
CHUNK = 4 * 1024 * 1024
#: Head-room kept free on top of what a download needs (the OS and logs need some too).
DISK_MARGIN = 64 * 1024 * 1024


@dataclass(frozen=True)
class DownloadProgress:
    """One progress report of a transfer.

    Attributes:
        label: what is transferred (usually the file name).
        stage: "download", "assemble" or "verify".
        done: bytes done in this stage.
        total: bytes this stage will take, or None when unknown.
        speed: bytes per second (smoothed), 0 before it can be known.
        eta: seconds left, or None when unknown.
        finished: True on the last report of a stage.
    """

    label: str
    stage: str
    done: int
    total: int | None
    speed: float
    eta: float | None
    finished: bool = False

    @property
    def fraction(self) -> float | None:
        if not self.total:
            return None
        return min(1.0, self.done / self.total)


ProgressCallback = Callable[[DownloadProgress], None]
FreeSpace = Callable[[Path], int]


class DownloadError(Exception):
    """A download that failed; the message is for the user."""


class DownloadCancelled(DownloadError):
    """The user cancelled; any partial file has been removed or kept for resume."""


class HubUnreachable(DownloadError):
    """The hub cannot be reached (offline, DNS, firewall): try another source."""


class ChecksumMismatch(DownloadError):
    """The bytes received are not the ones the catalog or the hub promised."""


class NotEnoughSpace(DownloadError):
    """The disk cannot hold the download."""


class ProgressMeter:
    """Turns byte counts into throttled DownloadProgress reports with speed and ETA."""

    def __init__(
        self,
        callback: ProgressCallback | None,
        *,
        label: str,
        stage: str,
        total: int | None,
        initial: int = 0,
        interval: float = 0.1,
    ) -> None:
        self.callback = callback
        self.label = label
        self.stage = stage
        self.total = total
        self.done = initial
        self.interval = interval
        self._start = time.monotonic()
        self._start_done = initial
        self._last_emit = 0.0
        self._speed = 0.0
        self._lock = threading.Lock()

    def update(self, delta: int) -> None:
        with self._lock:
            self.done += delta
            now = time.monotonic()
            if now - self._last_emit < self.interval:
                return
            self._last_emit = now
        self._emit(finished=False)

    def set(self, done: int) -> None:
        self.update(done - self.done)

    def finish(self) -> None:
        self._emit(finished=True)

    def _emit(self, *, finished: bool) -> None:
        if self.callback is None:
            return
        elapsed = time.monotonic() - self._start
        if elapsed > 0.2:
            self._speed = max(0, self.done - self._start_done) / elapsed
        eta = None
        if self.total is not None and self._speed > 0:
            eta = max(0.0, (self.total - self.done) / self._speed)
        if finished:
            eta = 0.0
        self.callback(
            DownloadProgress(
                label=self.label,
                stage=self.stage,
                done=self.done,
                total=self.total,
                speed=self._speed,
                eta=eta,
                finished=finished,
            )
        )


def check_cancel(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise DownloadCancelled("download cancelled")


def default_free_space(path: Path) -> int:
    """Free bytes on the volume holding `path` (or its nearest existing parent)."""
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return shutil.disk_usage(probe).free


def ensure_space(
    needed: int, where: Path, *, free_space: FreeSpace | None = None, what: str = "the download"
) -> None:
    """Raise NotEnoughSpace unless `where` has `needed` bytes plus a margin free."""
    free = (free_space or default_free_space)(where)
    if free < needed + DISK_MARGIN:
        raise NotEnoughSpace(
            f"not enough disk space for {what}: needs {format_bytes(needed)}, "
            f"{format_bytes(free)} free in {where}"
        )


#: Write errors that mean the disk (or the user's quota or file-size limit) is full.
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT})


def is_disk_full(error: BaseException) -> bool:
    return isinstance(error, OSError) and error.errno in DISK_FULL_ERRNOS


def format_bytes(count: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(count) < 1000 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    return f"{count:.1f} GB"


def sha256_file(
    path: Path,
    *,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    label: str | None = None,
) -> str:
    """sha256 of a file, reporting progress as stage "verify"."""
    size = path.stat().st_size
    meter = ProgressMeter(progress, label=label or path.name, stage="verify", total=size)
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            check_cancel(cancel)
            digest.update(chunk)
            meter.update(len(chunk))
    meter.finish()
    return digest.hexdigest()


# --- verification stamps ----------------------------------------------------------------
# Re-hashing a model file takes seconds and `make run` checks the pair every time, so a
# verified file gets a stamp of (size, mtime, sha256) and is trusted while those still match.


def stamp_path(path: Path) -> Path:
    resolved = path.resolve()
    models = paths.models_dir().resolve()
    if resolved.parent == models:
        return resolved.with_name(resolved.name + ".verified.json")
    # Files in the hub cache (or anywhere else) get their stamp in our own cache, so the
    # hub's cache layout stays exactly what huggingface_hub expects.
    key = hashlib.sha256(str(resolved).encode()).hexdigest()[:32]
    return paths.shared_cache_dir() / "stamps" / f"{key}.json"


def read_stamp(path: Path) -> str | None:
    """The sha256 recorded for `path` if its size and mtime still match the stamp."""
    try:
        stat = path.stat()
        data = json.loads(stamp_path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    if data.get("size") != stat.st_size or data.get("mtime_ns") != stat.st_mtime_ns:
        return None
    sha = data.get("sha256")
    return sha if isinstance(sha, str) else None


def write_stamp(path: Path, sha256: str) -> None:
    stat = path.stat()
    target = stamp_path(path)
    with contextlib.suppress(OSError):  # a stamp is an optimisation; never fail a fetch on it
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        tmp.write_text(
            json.dumps({"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": sha256}),
            encoding="utf-8",
        )
        os.replace(tmp, target)


def remove_stamp(path: Path) -> None:
    with contextlib.suppress(OSError):
        stamp_path(path).unlink()


def file_matches(
    path: Path,
    *,
    size: int | None,
    sha256: str | None,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    use_stamp: bool = True,
) -> bool:
    """True if `path` exists with the expected size and sha256 (None: not checked)."""
    try:
        actual_size = path.stat().st_size
    except OSError:
        return False
    if size is not None and actual_size != size:
        return False
    if sha256 is None:
        return True
    recorded = read_stamp(path) if use_stamp else None
    if recorded is None:
        recorded = sha256_file(path, progress=progress, cancel=cancel)
        write_stamp(path, recorded)
    return recorded == sha256.lower()
