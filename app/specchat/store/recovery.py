"""A damaged conversation database kept aside or backed up, and said so on stderr and in a log."""

from __future__ import annotations

import contextlib
import sqlite3
import sys
import time
from pathlib import Path

from specchat import paths

#: The log of what the store recovered, in the data folder beside the database.
LOG_NAME = "specchat.log"
_FILES = ("", "-wal", "-shm")


def log_path() -> Path:
    return paths.data_dir() / LOG_NAME


def report(message: str) -> None:
    """Say what was recovered on stderr and in the data folder's log, whatever else shows
    it: a window's notice alone leaves a start without a screen, or a script, none the wiser."""
    line = f"{time.strftime('%Y-%m-%d %H:%M:%S')} specchat: {message}"
    if sys.stderr is not None:  # None in a windowed bundle
        with contextlib.suppress(OSError, ValueError):
            print(f"specchat: {message}", file=sys.stderr, flush=True)
    with contextlib.suppress(OSError):
        log = log_path()
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a", encoding="utf-8") as file:
            file.write(line + "\n")


def unused_name(path: Path, label: str) -> Path:
    """`<name>.<label>-<stamp>` beside `path`, numbered when that name (or its WAL files)
    exists already: two recoveries in the same second keep both copies."""
    base = f"{path.name}.{label}-{time.strftime('%Y%m%d-%H%M%S')}"
    candidate, number = path.with_name(base), 2
    while any(Path(f"{candidate}{suffix}").exists() for suffix in _FILES):
        candidate, number = path.with_name(f"{base}-{number}"), number + 1
    return candidate


def move_aside(path: Path) -> Path:
    """Move a damaged database (and its WAL files) to an unused `.damaged-<stamp>` name."""
    target = unused_name(path, "damaged")
    for suffix in _FILES:
        source = Path(f"{path}{suffix}")
        if source.exists():
            source.replace(Path(f"{target}{suffix}"))
    return target


def back_up(db: sqlite3.Connection, path: Path) -> Path:
    """A consistent copy of the open database at an unused `.backup-<stamp>` name, taken
    before the store rewrites anything it could not read."""
    target = unused_name(path, "backup")
    copy = sqlite3.connect(str(target))
    try:
        db.backup(copy)
    finally:
        copy.close()
    return target
