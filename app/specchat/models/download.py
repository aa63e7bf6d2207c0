"""Model downloads: the hub through huggingface_hub, the mirror as fallback, all verified."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specchat import paths
from specchat.models.catalog import Catalog, ModelFile, ModelPair, load_catalog
from specchat.models.transfer import (
    ChecksumMismatch,
    DownloadCancelled,
    DownloadError,
    DownloadProgress,
    FreeSpace,
    HubUnreachable,
    NotEnoughSpace,
    ProgressCallback,
    ProgressMeter,
    check_cancel,
    ensure_space,
    file_matches,
    format_bytes,
    is_disk_full,
    remove_stamp,
    sha256_file,
    write_stamp,
)

__all__ = [
    "ChecksumMismatch",
    "DownloadCancelled",
    "DownloadError",
    "DownloadProgress",
    "HubUnreachable",
    "LocatedFile",
    "NotEnoughSpace",
    "PairFiles",
    "PartialDownload",
    "ProgressCallback",
    "delete_partial",
    "download_from_hub",
    "fetch_pair",
    "find_in_hub_cache",
    "find_partial",
    "hub_cache_dir",
    "hub_size",
    "locate_file",
    "resolve_pair_files",
    "verify_located",
]

#: Seconds to wait for the hub to answer the metadata request. The hub is often simply
#: unreachable (offline, firewalled CI); the mirror fallback must start within seconds.
HUB_TIMEOUT_S = 5.0
#: Attempts at a hub download that fails transiently (5xx, 429, dropped connection after
#: huggingface_hub's own in-call resumes are spent).
HUB_ATTEMPTS = 4
#: First back-off pause; doubled after each failed attempt.
BACKOFF_S = 1.0
#: Bytes huggingface_hub's http_get reads before it hands data to the file and the progress
#: bar. Its default of 10 MiB means a bar that jumps, a cancel that waits for the next 10 MiB
#: and a resume that restarts at the last 10 MiB boundary; 1 MiB keeps all three responsive.
HUB_CHUNK = 1024 * 1024
_SHA256 = re.compile(r"[0-9a-f]{64}")
SOURCES = ("auto", "hub", "mirror")


@dataclass(frozen=True)
class LocatedFile:
    """A model file found on disk and what it must match.

    Attributes:
        path: the file (a hub-cache snapshot link or a file in the models folder).
        source: "hub" or "mirror" (whose size and sha256 apply: the two differ).
        size: expected bytes, or None when unknown.
        sha256: expected sha256, or None when unknown.
    """

    path: Path
    source: str
    size: int | None
    sha256: str | None


@dataclass(frozen=True)
class PairFiles:
    """Where a pair's two files are.

    Attributes:
        target: the target model file.
        draft: the draft model file.
    """

    target: Path
    draft: Path


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


def hub_size(
    model: ModelFile, *, endpoint: str | None = None, timeout: float = HUB_TIMEOUT_S
) -> int | None:
    """The file's size as the hub announces it (one HEAD request), or None if it cannot say."""
    from huggingface_hub.errors import HfHubHTTPError

    if model.size is not None:
        return model.size
    try:
        metadata = _hub_metadata(model, (endpoint or hub_endpoint()).rstrip("/"), timeout)
    except (DownloadError, HfHubHTTPError, OSError):
        return None
    size = metadata.size
    return size if isinstance(size, int) else None


# --- finding files already on disk -------------------------------------------------------


def find_in_hub_cache(model: ModelFile, *, cache_dir: Path | None = None) -> Path | None:
    """The file in the hub cache (downloaded by SpecChat or any other hub tool), or None."""
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(
        model.repo, model.filename, cache_dir=_cache_root(cache_dir), revision=model.revision
    )
    if isinstance(found, str) and os.path.isfile(found):
        return Path(found)
    return None


def _hub_expected_sha(model: ModelFile, path: Path) -> str | None:
    if model.sha256:
        return model.sha256
    # The hub cache names each blob by its etag, which for an LFS file is its sha256.
    blob = path.resolve().name
    return blob if _SHA256.fullmatch(blob) else None


def locate_file(
    model: ModelFile, *, cache_dir: Path | None = None, models_dir: Path | None = None
) -> LocatedFile | None:
    """Where `model` already is: the hub cache first, then the mirror's models folder."""
    hub = find_in_hub_cache(model, cache_dir=cache_dir)
    if hub is not None:
        return LocatedFile(hub, "hub", model.size, _hub_expected_sha(model, hub))
    local = (paths.models_dir() if models_dir is None else models_dir) / Path(model.filename).name
    if local.is_file():
        mirror = model.mirror
        return LocatedFile(
            local,
            "mirror",
            mirror.size if mirror else model.size,
            mirror.sha256 if mirror else model.sha256,
        )
    return None


def resolve_pair_files(
    pair: ModelPair, *, cache_dir: Path | None = None, models_dir: Path | None = None
) -> PairFiles | None:
    """Paths of both files if both are on disk (not re-verified), else None."""
    target = locate_file(pair.target, cache_dir=cache_dir, models_dir=models_dir)
    draft = locate_file(pair.draft, cache_dir=cache_dir, models_dir=models_dir)
    if target is None or draft is None:
        return None
    return PairFiles(target.path, draft.path)


def verify_located(
    located: LocatedFile,
    *,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    use_stamp: bool = True,
) -> bool:
    """True if the file matches its source's size and sha256 (a stamp spares re-hashing)."""
    return file_matches(
        located.path,
        size=located.size,
        sha256=located.sha256,
        progress=progress,
        cancel=cancel,
        use_stamp=use_stamp,
    )


# --- hub downloads -----------------------------------------------------------------------


def _progress_bar_class(meter: ProgressMeter, cancel: threading.Event | None) -> type:
    """A tqdm stand-in for http_get's `tqdm_class` that feeds our meter.

    Raising DownloadCancelled from `update` is how cancel reaches into http_get: it is
    called before each chunk is written, so the exception unwinds the streaming loop with
    the partial file holding only whole chunks, ready to be resumed.
    """

    class _Bar:
        def __init__(
            self, *args: Any, total: int | None = None, initial: int = 0, **kwargs: Any
        ) -> None:
            if total:
                meter.total = total
            meter.set(initial)

        def update(self, n: int | float | None = 1) -> None:
            check_cancel(cancel)
            meter.update(int(n or 0))

        def close(self) -> None:
            pass

        def __enter__(self) -> _Bar:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

    return _Bar


def _is_transient(error: BaseException) -> bool:
    import httpx2
    from huggingface_hub.errors import HfHubHTTPError

    if isinstance(error, HfHubHTTPError):
        response = getattr(error, "response", None)
        status = getattr(response, "status_code", None)
        return status is not None and (status >= 500 or status in (408, 429))
    return isinstance(error, httpx2.TransportError)


def _describe(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


def _hub_metadata(
    model: ModelFile, endpoint: str, timeout: float, token: str | bool | None = None
) -> Any:
    """The hub's HEAD answer for the file; raises HubUnreachable fast when offline."""
    import httpx2
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        OfflineModeIsEnabled,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    url = hf_hub_url(model.repo, model.filename, revision=model.revision, endpoint=endpoint)
    try:
        return get_hf_file_metadata(url, token=token, timeout=timeout, endpoint=endpoint)
    except (httpx2.ConnectError, httpx2.TimeoutException, OfflineModeIsEnabled) as error:
        reason = _describe(error)
        raise HubUnreachable(f"the hub ({endpoint}) cannot be reached: {reason}") from None
    except GatedRepoError:
        raise DownloadError(
            f"{model.repo} is gated: accept its licence on the hub and log in "
            "(`hf auth login`) to download it"
        ) from None
    except (RepositoryNotFoundError, RevisionNotFoundError, RemoteEntryNotFoundError):
        raise DownloadError(
            f"{model.filename} was not found in {model.repo}@{model.revision} on the hub"
        ) from None
    except HfHubHTTPError as error:
        if _is_transient(error):
            raise
        raise DownloadError(f"the hub refused {model.filename}: {_describe(error)}") from None


def _delete_cached(path: Path) -> None:
    """Remove a hub-cache snapshot link and the blob behind it."""
    blob = path.resolve()
    remove_stamp(path)
    for victim in (path, blob):
        with contextlib.suppress(OSError):
            victim.unlink()


def _wait(cancel: threading.Event | None, seconds: float) -> None:
    if cancel is not None:
        if cancel.wait(seconds):
            raise DownloadCancelled("download cancelled")
    else:
        time.sleep(seconds)


# --- resumable partial files -------------------------------------------------------------
# huggingface_hub >= 1.x downloads into a process-unique `<etag>.<uuid>.incomplete` and
# deletes it on any failure (huggingface/huggingface_hub#4228), so an interrupted 1 GB
# download would restart from zero. SpecChat streams into the stable `<etag>.incomplete`
# name older hub versions used (same folder, same `.locks/<repo>/<etag>.lock`, so hub tools
# and SpecChat never write one file at once) and resumes it with a ranged GET. A small
# record in SpecChat's cache remembers which partial belongs to which catalog file, so the
# picker can show and delete it without asking the network for the etag.


def _cache_root(cache_dir: Path | None) -> Path:
    return Path(cache_dir) if cache_dir is not None else hub_cache_dir()


def _partial_record(model: ModelFile, cache_dir: Path | None) -> Path:
    key = "|".join(
        (str(_cache_root(cache_dir).absolute()), model.repo, model.revision, model.filename)
    )
    digest = hashlib.sha256(key.encode()).hexdigest()[:32]
    return paths.shared_cache_dir() / "partials" / f"{digest}.json"


def _remember_partial(
    model: ModelFile, cache_dir: Path | None, partial: Path, total: int | None
) -> None:
    record = _partial_record(model, cache_dir)
    with contextlib.suppress(OSError):  # losing the record only loses the offline view
        record.parent.mkdir(parents=True, exist_ok=True)
        tmp = record.with_name(f".{record.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"path": str(partial), "total": total}), encoding="utf-8")
        os.replace(tmp, record)


def _forget_partial(model: ModelFile, cache_dir: Path | None) -> None:
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
    _forget_partial(model, cache_dir)
    if partial is None:
        return False
    with contextlib.suppress(FileNotFoundError):
        partial.path.unlink()
    return True


def _link_into_snapshot(blob: Path, pointer: Path) -> None:
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


def _write_ref(storage: Path, revision: str, commit: str) -> None:
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


def download_from_hub(
    model: ModelFile,
    *,
    cache_dir: Path | None = None,
    endpoint: str | None = None,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    free_space: FreeSpace | None = None,
    timeout: float = HUB_TIMEOUT_S,
    attempts: int = HUB_ATTEMPTS,
    token: str | bool | None = None,
) -> Path:
    """Download one file into the hub cache (reusing it if already there) and verify it.

    An interrupted download (cancel, dropped connection, closed app) leaves its partial
    file, and the next call resumes it from its size; `delete_partial` discards it.
    The sha256 checked is the catalog's, or else the hub's LFS sha256 (its etag). A file
    that does not match is deleted and ChecksumMismatch raised. Raises HubUnreachable
    within about `timeout` seconds when the hub cannot be reached.
    """
    from huggingface_hub import constants
    from huggingface_hub.errors import HfHubHTTPError

    # http_get reads this module attribute on every call (see HUB_CHUNK).
    constants.DOWNLOAD_CHUNK_SIZE = min(constants.DOWNLOAD_CHUNK_SIZE, HUB_CHUNK)
    endpoint = (endpoint or hub_endpoint()).rstrip("/")
    check_cancel(cancel)
    cached = find_in_hub_cache(model, cache_dir=cache_dir)
    if cached is not None:
        located = LocatedFile(cached, "hub", model.size, _hub_expected_sha(model, cached))
        if verify_located(located, progress=progress, cancel=cancel):
            return cached
        _delete_cached(cached)

    last_error: BaseException | None = None
    for attempt in range(1, attempts + 1):
        check_cancel(cancel)
        try:
            return _download_once(
                model,
                cache_dir=cache_dir,
                endpoint=endpoint,
                progress=progress,
                cancel=cancel,
                free_space=free_space,
                timeout=timeout,
                token=token,
            )
        except (DownloadError, KeyboardInterrupt):
            raise
        except HfHubHTTPError as error:
            if not _is_transient(error):
                reason = _describe(error)
                raise DownloadError(f"the hub refused {model.filename}: {reason}") from None
            last_error = error
        except OSError as error:
            # http_get's "Consistency check failed" (received size != announced size) and
            # dropped connections after its own resumes land here; the partial stays.
            last_error = error
        except Exception as error:
            if not _is_transient(error):
                reason = _describe(error)
                raise DownloadError(f"downloading {model.filename} failed: {reason}") from None
            last_error = error
        if attempt < attempts:
            _wait(cancel, BACKOFF_S * 2 ** (attempt - 1))
    kept = find_partial(model, cache_dir=cache_dir)
    resume = (
        f"; {format_bytes(kept.done)} are kept and the next try resumes from there"
        if kept is not None and kept.done
        else ""
    )
    raise DownloadError(
        f"downloading {model.filename} failed after {attempts} attempts: "
        f"{_describe(last_error) if last_error else 'unknown error'}{resume}"
    )


def _download_once(
    model: ModelFile,
    *,
    cache_dir: Path | None,
    endpoint: str,
    progress: ProgressCallback | None,
    cancel: threading.Event | None,
    free_space: FreeSpace | None,
    timeout: float,
    token: str | bool | None,
) -> Path:
    from urllib.parse import urlsplit

    from huggingface_hub import hf_hub_url
    from huggingface_hub.file_download import http_get, repo_folder_name
    from huggingface_hub.utils import WeakFileLock, build_hf_headers

    metadata = _hub_metadata(model, endpoint, timeout, token)
    hub_size = metadata.size
    if model.size is not None and hub_size is not None and hub_size != model.size:
        raise ChecksumMismatch(
            f"the hub's {model.filename} is {hub_size} bytes but the catalog expects "
            f"{model.size}: the file changed upstream; not downloading it"
        )
    expected_size = model.size if model.size is not None else hub_size
    etag = (metadata.etag or "").lower()
    commit = metadata.commit_hash
    if not etag or not commit:
        raise DownloadError(
            f"the hub's answer for {model.filename} lacks an etag or commit; cannot cache it"
        )
    expected_sha = model.sha256 or (etag if _SHA256.fullmatch(etag) else None)

    root = _cache_root(cache_dir)
    folder = repo_folder_name(repo_id=model.repo, repo_type="model")
    storage = root / folder
    blob = storage / "blobs" / etag
    partial = blob.with_name(f"{etag}.incomplete")
    pointer = storage / "snapshots" / commit / model.filename
    lock = root / ".locks" / folder / f"{etag}.lock"
    blob.parent.mkdir(parents=True, exist_ok=True)
    lock.parent.mkdir(parents=True, exist_ok=True)

    with WeakFileLock(lock):
        if not blob.exists():
            _remember_partial(model, cache_dir, partial, expected_size)
            done = partial.stat().st_size if partial.exists() else 0
            if expected_size is not None and done > expected_size:
                done = 0  # not a prefix of this file: start over
                partial.unlink()
            if expected_size is not None:
                ensure_space(expected_size - done, root, free_space=free_space, what=model.filename)
            headers = build_hf_headers(token=token)
            # A Range on a compressed body means nothing; ask for the bytes as stored.
            headers["Accept-Encoding"] = "identity"
            # As hf_hub_download does: an LFS file is fetched from the signed CDN address the
            # HEAD redirected to (without the token, which must not leak to another host); a
            # Xet-backed one from its resolve URL, whose redirect the client follows.
            url = metadata.location
            if getattr(metadata, "xet_file_data", None) is not None:
                url = hf_hub_url(
                    model.repo, model.filename, revision=model.revision, endpoint=endpoint
                )
            elif urlsplit(url).netloc != urlsplit(endpoint).netloc:
                headers.pop("authorization", None)
            meter = ProgressMeter(
                progress, label=model.filename, stage="download", total=expected_size
            )
            try:
                with open(partial, "ab") as handle:
                    http_get(
                        url,
                        handle,
                        resume_size=done,
                        headers=headers,
                        expected_size=expected_size,
                        displayed_filename=model.filename,
                        tqdm_class=_progress_bar_class(meter, cancel),
                    )
            except DownloadCancelled:
                kept = partial.stat().st_size if partial.exists() else 0
                raise DownloadCancelled(
                    f"download cancelled; {format_bytes(kept)} of {model.filename} kept to resume"
                ) from None
            except OSError as error:
                if is_disk_full(error):
                    # Keeping the partial would leave the disk full; it cannot finish anyway.
                    _discard(partial, model, cache_dir)
                    raise NotEnoughSpace(
                        f"the disk filled up while downloading {model.filename} "
                        f"({error.strerror}); the partial file was removed"
                    ) from None
                raise
            meter.set(partial.stat().st_size)
            meter.finish()
            check_cancel(cancel)
            try:
                _check_received(partial, model, expected_size, expected_sha, progress, cancel)
            except ChecksumMismatch:
                _forget_partial(model, cache_dir)
                raise
            os.replace(partial, blob)
            _forget_partial(model, cache_dir)
        else:
            # Another tool (or an earlier run) has the blob but not this commit's link.
            _check_received(blob, model, expected_size, expected_sha, progress, cancel)
        _link_into_snapshot(blob, pointer)
        _write_ref(storage, model.revision, commit)
    if expected_sha is not None:
        write_stamp(pointer, expected_sha)
    return pointer


def _discard(partial: Path, model: ModelFile, cache_dir: Path | None) -> None:
    with contextlib.suppress(FileNotFoundError):
        partial.unlink()
    _forget_partial(model, cache_dir)


def _check_received(
    path: Path,
    model: ModelFile,
    expected_size: int | None,
    expected_sha: str | None,
    progress: ProgressCallback | None,
    cancel: threading.Event | None,
) -> None:
    """Raise ChecksumMismatch (deleting the file: resuming it could never help) unless it fits."""
    actual_size = path.stat().st_size
    if expected_size is not None and actual_size != expected_size:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        raise ChecksumMismatch(
            f"{model.filename}: received {actual_size} bytes, expected {expected_size}; "
            "the file was deleted"
        )
    if expected_sha is None:
        return
    actual = sha256_file(path, progress=progress, cancel=cancel, label=model.filename)
    if actual != expected_sha:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        raise ChecksumMismatch(
            f"{model.filename}: sha256 is {actual}, expected {expected_sha}; the file was deleted"
        )


# --- whole pairs -------------------------------------------------------------------------


def fetch_file(
    model: ModelFile,
    *,
    source: str = "auto",
    cache_dir: Path | None = None,
    models_dir: Path | None = None,
    endpoint: str | None = None,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    free_space: FreeSpace | None = None,
    hub_timeout: float = HUB_TIMEOUT_S,
    notify: Callable[[str], None] | None = None,
) -> Path:
    """One verified file: already on disk, else from the hub, else (auto) from the mirror.

    `notify` receives a line for the user when the hub fails and the mirror takes over.
    """
    if source not in SOURCES:
        raise DownloadError(f"unknown source {source!r}; use one of {', '.join(SOURCES)}")
    located = locate_file(model, cache_dir=cache_dir, models_dir=models_dir)
    usable = located is not None and source in ("auto", located.source)
    if located is not None and usable and verify_located(located, progress=progress, cancel=cancel):
        return located.path
    hub_error: DownloadError | None = None
    if source in ("auto", "hub"):
        try:
            return download_from_hub(
                model,
                cache_dir=cache_dir,
                endpoint=endpoint,
                progress=progress,
                cancel=cancel,
                free_space=free_space,
                timeout=hub_timeout,
            )
        except (DownloadCancelled, NotEnoughSpace):
            raise  # the mirror would need the same disk, and the user said stop
        except DownloadError as error:
            # Unreachable, gone, gated or damaged at the hub: the mirror is an independent
            # source with its own checksum, so it is worth the try.
            if source == "hub" or model.mirror is None:
                raise
            hub_error = error
            if notify is not None:
                notify(f"{error}; using the mirror instead")
    if model.mirror is None:
        raise DownloadError(f"{model.filename} has no mirror source in the catalog")
    from specchat.models.mirror import fetch_from_mirror

    try:
        return fetch_from_mirror(
            model, dest_dir=models_dir, progress=progress, cancel=cancel, free_space=free_space
        )
    except DownloadError as error:
        if hub_error is not None and not isinstance(error, DownloadCancelled):
            raise DownloadError(f"{hub_error}; the mirror failed too: {error}") from None
        raise


def fetch_pair(
    pair_id: str,
    *,
    source: str = "auto",
    catalog: Catalog | None = None,
    cache_dir: Path | None = None,
    models_dir: Path | None = None,
    endpoint: str | None = None,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    free_space: FreeSpace | None = None,
    hub_timeout: float = HUB_TIMEOUT_S,
    notify: Callable[[str], None] | None = None,
) -> PairFiles:
    """Make both files of a catalog pair present and verified; returns their paths.

    source: "hub" (hub only), "mirror" (mirror only) or "auto" (the hub, falling back to
    the mirror when the hub is unreachable).
    """
    pair = (catalog or load_catalog()).get(pair_id)
    found = {}
    for role, model in pair.files():
        found[role] = fetch_file(
            model,
            source=source,
            cache_dir=cache_dir,
            models_dir=models_dir,
            endpoint=endpoint,
            progress=progress,
            cancel=cancel,
            free_space=free_space,
            hub_timeout=hub_timeout,
            notify=notify,
        )
    return PairFiles(target=found["target"], draft=found["draft"])
