"""Resumable, verified downloads of one file into the hub cache through huggingface_hub."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from specchat.models.catalog import ModelFile
from specchat.models.hub_cache import (
    SHA256,
    cache_root,
    delete_cached,
    find_in_hub_cache,
    find_partial,
    forget_partial,
    hub_endpoint,
    hub_expected_sha,
    link_into_snapshot,
    remember_partial,
    write_ref,
)
from specchat.models.transfer import (
    ChecksumMismatch,
    DownloadCancelled,
    DownloadError,
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
    sha256_file,
    write_stamp,
)

log = logging.getLogger(__name__)

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
    # "[Errno 104] Connection reset by peer": the number means nothing to people.
    return re.sub(r"\[Errno -?\d+\]\s*", "", text[0]) if text else type(error).__name__


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
        # People read this: what it means, not the resolver's "[Errno -2] Name or service...".
        log.info("the hub at %s did not answer: %s", endpoint, error)
        raise HubUnreachable(
            f"the hub cannot be reached (no network?): {endpoint} did not answer"
        ) from None
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
    notify: Callable[[str], None] | None = None,
) -> Path:
    """Download one file into the hub cache (reusing it if already there) and verify it.

    An interrupted download (cancel, dropped connection, closed app) leaves its partial
    file, and the next call resumes it from its size; `delete_partial` discards it.
    The sha256 checked is the catalog's, or else the hub's LFS sha256 (its etag). A file
    that does not match is deleted and ChecksumMismatch raised. Raises HubUnreachable
    within about `timeout` seconds when the hub cannot be reached. When no sha256 is known
    at all, `notify` is told that the file is not verified.
    """
    from huggingface_hub import constants
    from huggingface_hub.errors import HfHubHTTPError

    # http_get reads this module attribute on every call (see HUB_CHUNK).
    constants.DOWNLOAD_CHUNK_SIZE = min(constants.DOWNLOAD_CHUNK_SIZE, HUB_CHUNK)
    endpoint = (endpoint or hub_endpoint()).rstrip("/")
    check_cancel(cancel)
    cached = find_in_hub_cache(model, cache_dir=cache_dir)
    if cached is not None:
        expected = hub_expected_sha(model, cached)
        if file_matches(cached, size=model.size, sha256=expected, progress=progress, cancel=cancel):
            _say_if_unverified(model, cached, notify)
            return cached
        delete_cached(cached)

    last_error: BaseException | None = None
    for attempt in range(1, attempts + 1):
        check_cancel(cancel)
        try:
            path = _download_once(
                model,
                cache_dir=cache_dir,
                endpoint=endpoint,
                progress=progress,
                cancel=cancel,
                free_space=free_space,
                timeout=timeout,
                token=token,
            )
            _say_if_unverified(model, path, notify)
            return path
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
            if notify is not None and last_error is not None:
                notify(
                    f"{model.filename}: {_describe(last_error)}; trying again "
                    f"({attempt + 1} of {attempts})…"
                )
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
    expected_sha = model.sha256 or (etag if SHA256.fullmatch(etag) else None)

    root = cache_root(cache_dir)
    folder = repo_folder_name(repo_id=model.repo, repo_type="model")
    storage = root / folder
    blob = storage / "blobs" / etag
    partial = blob.with_name(f"{etag}.incomplete")
    pointer: Path = storage / "snapshots" / commit / model.filename
    lock = root / ".locks" / folder / f"{etag}.lock"
    blob.parent.mkdir(parents=True, exist_ok=True)
    lock.parent.mkdir(parents=True, exist_ok=True)

    with WeakFileLock(lock):
        if not blob.exists():
            remember_partial(model, cache_dir, partial, expected_size)
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
                forget_partial(model, cache_dir)
                raise
            os.replace(partial, blob)
            forget_partial(model, cache_dir)
        else:
            # Another tool (or an earlier run) has the blob but not this commit's link.
            _check_received(blob, model, expected_size, expected_sha, progress, cancel)
        link_into_snapshot(blob, pointer)
        write_ref(storage, model.revision, commit)
    if expected_sha is not None:
        write_stamp(pointer, expected_sha)
    return pointer


def _discard(partial: Path, model: ModelFile, cache_dir: Path | None) -> None:
    with contextlib.suppress(FileNotFoundError):
        partial.unlink()
    forget_partial(model, cache_dir)


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


def unverified_notice(filename: str) -> str:
    """What the user is told about a file no sha256 could be checked for."""
    return (
        f"{filename} is NOT verified: no sha256 is known for it (none in the catalog, and the "
        "hub's etag is not one), so only its size was checked"
    )


def _say_if_unverified(model: ModelFile, path: Path, notify: Callable[[str], None] | None) -> None:
    # The hub names a blob by its etag, which is the sha256 only for LFS files.
    if notify is not None and hub_expected_sha(model, path) is None:
        notify(unverified_notice(model.filename))
