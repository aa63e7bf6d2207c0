"""Model downloads: the hub through huggingface_hub, the mirror as fallback, all verified."""

from __future__ import annotations

import contextlib
import os
import re
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
    "ProgressCallback",
    "download_from_hub",
    "fetch_pair",
    "find_in_hub_cache",
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
#: Bytes huggingface_hub reads before it hands data to the file and the progress bar. Its
#: default of 10 MiB means a bar that jumps, a cancel that waits for the next 10 MiB and a
#: resume that restarts at the last 10 MiB boundary; 1 MiB keeps all three responsive.
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


def hub_endpoint() -> str:
    # Read at call time: huggingface_hub reads HF_ENDPOINT once at import, which would pin
    # whatever was set when the first module imported it.
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")


# --- finding files already on disk -------------------------------------------------------


def find_in_hub_cache(model: ModelFile, *, cache_dir: Path | None = None) -> Path | None:
    """The file in the hub cache (downloaded by SpecChat or any other hub tool), or None."""
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(
        model.repo, model.filename, cache_dir=cache_dir, revision=model.revision
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
    """A tqdm stand-in for huggingface_hub's `tqdm_class` that feeds our meter.

    Raising DownloadCancelled from `update` is how cancel reaches into hf_hub_download:
    the exception unwinds its streaming loop and it deletes its temporary file.
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


def _hub_metadata(model: ModelFile, endpoint: str, timeout: float) -> Any:
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
        return get_hf_file_metadata(url, timeout=timeout, endpoint=endpoint)
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

    The sha256 checked is the catalog's, or else the hub's LFS sha256 (its etag). A file
    that does not match is deleted and ChecksumMismatch raised. Raises HubUnreachable
    within about `timeout` seconds when the hub cannot be reached.
    """
    from huggingface_hub import constants, hf_hub_download
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
                hf_hub_download,
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
            if is_disk_full(error):
                # huggingface_hub has already removed its temporary file; retrying would
                # only fill the disk again.
                raise NotEnoughSpace(
                    f"the disk filled up while downloading {model.filename} ({error.strerror}); "
                    "the partial file was removed"
                ) from None
            # huggingface_hub's "Consistency check failed" (received size != announced size)
            # and dropped connections after its own resumes land here.
            last_error = error
        except Exception as error:
            if not _is_transient(error):
                reason = _describe(error)
                raise DownloadError(f"downloading {model.filename} failed: {reason}") from None
            last_error = error
        if attempt < attempts:
            _wait(cancel, BACKOFF_S * 2 ** (attempt - 1))
    raise DownloadError(
        f"downloading {model.filename} failed after {attempts} attempts: "
        f"{_describe(last_error) if last_error else 'unknown error'}"
    )


def _download_once(
    model: ModelFile,
    hf_hub_download: Any,
    *,
    cache_dir: Path | None,
    endpoint: str,
    progress: ProgressCallback | None,
    cancel: threading.Event | None,
    free_space: FreeSpace | None,
    timeout: float,
    token: str | bool | None,
) -> Path:
    metadata = _hub_metadata(model, endpoint, timeout)
    hub_size = metadata.size
    if model.size is not None and hub_size is not None and hub_size != model.size:
        raise ChecksumMismatch(
            f"the hub's {model.filename} is {hub_size} bytes but the catalog expects "
            f"{model.size}: the file changed upstream; not downloading it"
        )
    expected_size = model.size if model.size is not None else hub_size
    etag = (metadata.etag or "").lower()
    expected_sha = model.sha256 or (etag if _SHA256.fullmatch(etag) else None)
    if expected_size is not None:
        from huggingface_hub import constants

        cache_root = Path(cache_dir) if cache_dir is not None else Path(constants.HF_HUB_CACHE)
        ensure_space(expected_size, cache_root, free_space=free_space, what=model.filename)

    meter = ProgressMeter(progress, label=model.filename, stage="download", total=expected_size)
    path = Path(
        hf_hub_download(
            model.repo,
            model.filename,
            revision=model.revision,
            cache_dir=cache_dir,
            endpoint=endpoint,
            etag_timeout=timeout,
            token=token,
            tqdm_class=_progress_bar_class(meter, cancel),
        )
    )
    meter.finish()
    check_cancel(cancel)
    actual_size = path.stat().st_size
    if expected_size is not None and actual_size != expected_size:
        _delete_cached(path)
        raise ChecksumMismatch(
            f"{model.filename}: received {actual_size} bytes, expected {expected_size}; "
            "the file was deleted"
        )
    if expected_sha is None:
        return path
    actual = sha256_file(path, progress=progress, cancel=cancel, label=model.filename)
    if actual != expected_sha:
        _delete_cached(path)
        raise ChecksumMismatch(
            f"{model.filename}: sha256 is {actual}, expected {expected_sha}; the file was deleted"
        )
    write_stamp(path, actual)
    return path


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
