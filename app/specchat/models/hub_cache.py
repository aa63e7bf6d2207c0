"""The hub cache on disk: where files, partial downloads and snapshot links live."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from specchat import paths
from specchat.models.catalog import ModelFile
from specchat.models.transfer import remove_stamp

#: A sha256 in hex: the hub names an LFS blob (and gives its etag) by the file's sha256.
SHA256 = re.compile(r"[0-9a-f]{64}")


def hub_endpoint() -> str:
    # Read at call time: huggingface_hub reads HF_ENDPOINT once at import, which would pin
    # whatever was set when the first module imported it.
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


def hub_cache_dir() -> Path:
    """The hub cache folder, read at call time (huggingface_hub reads HF_HUB_CACHE once)."""
    override = os.environ.get("HF_HUB_CACHE")
    if override:
        return Path(override)
    home = os.environ.get("HF_HOME")
    if home:
        return Path(home) / "hub"
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def cache_root(cache_dir: Path | None) -> Path:
    return Path(cache_dir) if cache_dir is not None else hub_cache_dir()


def find_in_hub_cache(model: ModelFile, *, cache_dir: Path | None = None) -> Path | None:
    """The file in the hub cache (downloaded by SpecChat or any other hub tool), or None."""
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(
        model.repo, model.filename, cache_dir=cache_root(cache_dir), revision=model.revision
    )
    if isinstance(found, str) and os.path.isfile(found):
        return Path(found)
    return None


def hub_expected_sha(model: ModelFile, path: Path) -> str | None:
    if model.sha256:
        return model.sha256
    # The hub cache names each blob by its etag, which for an LFS file is its sha256.
    blob = path.resolve().name
    return blob if SHA256.fullmatch(blob) else None


def delete_cached(path: Path) -> None:
    """Remove a hub-cache snapshot link and the blob behind it."""
    blob = path.resolve()
    remove_stamp(path)
    for victim in (path, blob):
        with contextlib.suppress(OSError):
            victim.unlink()


# --- resumable partial files -------------------------------------------------------------
# huggingface_hub >= 1.x downloads into a process-unique `<etag>.<uuid>.incomplete` and
# deletes it on any failure (huggingface/huggingface_hub#4228), so an interrupted 1 GB
# download would restart from zero. SpecChat streams into the stable `<etag>.incomplete`
# name older hub versions used (same folder, same `.locks/<repo>/<etag>.lock`, so hub tools
# and SpecChat never write one file at once) and resumes it with a ranged GET. A small
# record in SpecChat's cache remembers which partial belongs to which catalog file, so the
# picker can show and delete it without asking the network for the etag.


@dataclass(frozen=True)
class PartialDownload:
    """A hub download interrupted part-way, kept so that the next attempt resumes it.

    Attributes:
        path: the `<etag>.incomplete` file beside the blobs in the hub cache.
        done: bytes already on disk.
        total: bytes of the whole file, or None when unknown.
    """

    path: Path
    done: int
    total: int | None

    @property
    def fraction(self) -> float | None:
        if not self.total:
            return None
        return min(1.0, self.done / self.total)


def _partial_record(model: ModelFile, cache_dir: Path | None) -> Path:
    key = "|".join(
        (str(cache_root(cache_dir).absolute()), model.repo, model.revision, model.filename)
    )
    digest = hashlib.sha256(key.encode()).hexdigest()[:32]
    return paths.shared_cache_dir() / "partials" / f"{digest}.json"


def remember_partial(
    model: ModelFile, cache_dir: Path | None, partial: Path, total: int | None
) -> None:
    record = _partial_record(model, cache_dir)
    with contextlib.suppress(OSError):  # losing the record only loses the offline view
        record.parent.mkdir(parents=True, exist_ok=True)
        tmp = record.with_name(f".{record.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"path": str(partial), "total": total}), encoding="utf-8")
        os.replace(tmp, record)


def forget_partial(model: ModelFile, cache_dir: Path | None) -> None:
    with contextlib.suppress(OSError):
        _partial_record(model, cache_dir).unlink()


def find_partial(model: ModelFile, *, cache_dir: Path | None = None) -> PartialDownload | None:
    """The interrupted hub download of `model` that the next fetch would resume, or None."""
    try:
        data = json.loads(_partial_record(model, cache_dir).read_text(encoding="utf-8"))
        path = Path(data["path"])
        total = data.get("total")
        done = path.stat().st_size
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return PartialDownload(path, done, total if isinstance(total, int) else None)


def delete_partial(model: ModelFile, *, cache_dir: Path | None = None) -> bool:
    """Delete the interrupted download of `model` (the user gave up on it); True if one was."""
    partial = find_partial(model, cache_dir=cache_dir)
    forget_partial(model, cache_dir)
    if partial is None:
        return False
    with contextlib.suppress(FileNotFoundError):
        partial.path.unlink()
    return True


def link_into_snapshot(blob: Path, pointer: Path) -> None:
    """Point snapshots/<commit>/<file> at the blob, as huggingface_hub lays out its cache."""
    pointer.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        pointer.unlink()
    try:
        # Relative, like the hub's own links, so a moved cache folder keeps working.
        pointer.symlink_to(os.path.relpath(blob, pointer.parent))
    except OSError:
        # No symlinks (Windows without developer mode): the hub then keeps a copy too.
        shutil.copyfile(blob, pointer)


def write_ref(storage: Path, revision: str, commit: str) -> None:
    if revision == commit:
        return
    ref = storage / "refs" / revision
    ref.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        if ref.read_text(encoding="utf-8") == commit:
            return
    tmp = ref.with_name(f".{ref.name}.{os.getpid()}.tmp")
    tmp.write_text(commit, encoding="utf-8")
    os.replace(tmp, ref)
