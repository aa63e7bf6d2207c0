"""Model downloads: the hub through huggingface_hub, the mirror as fallback, all verified."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from specchat import paths
from specchat.models.catalog import Catalog, ModelFile, ModelPair, load_catalog
from specchat.models.hub_cache import (
    PartialDownload,
    delete_partial,
    find_in_hub_cache,
    find_partial,
    hub_cache_dir,
    hub_expected_sha,
)
from specchat.models.hub_download import (
    HUB_TIMEOUT_S,
    download_from_hub,
    hub_size,
    unverified_notice,
)
from specchat.models.transfer import (
    ChecksumMismatch,
    DownloadCancelled,
    DownloadError,
    DownloadProgress,
    FreeSpace,
    HubUnreachable,
    NotEnoughSpace,
    ProgressCallback,
    file_matches,
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
    "unverified_notice",
    "verify_located",
]

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

    @property
    def checkable(self) -> bool:
        """Whether a sha256 is known to check the file against (else only its size is)."""
        return self.sha256 is not None


@dataclass(frozen=True)
class PairFiles:
    """Where a pair's files are.

    Attributes:
        target: the target model file.
        draft: the draft file (a draft model or an assistant), or None when the target's
            own MTP head drafts.
    """

    target: Path
    draft: Path | None


def locate_file(
    model: ModelFile, *, cache_dir: Path | None = None, models_dir: Path | None = None
) -> LocatedFile | None:
    """Where `model` already is: the hub cache first, then the mirror's models folder."""
    hub = find_in_hub_cache(model, cache_dir=cache_dir)
    if hub is not None:
        return LocatedFile(hub, "hub", model.size, hub_expected_sha(model, hub))
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
    """Paths of the pair's files if all are on disk (not re-verified), else None."""
    found: dict[str, Path] = {}
    for role, model in pair.files():
        located = locate_file(model, cache_dir=cache_dir, models_dir=models_dir)
        if located is None:
            return None
        found[role] = located.path
    return PairFiles(found["target"], found.get("draft"))


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

    `notify` receives a line for the user when the hub fails and the mirror takes over, and
    when no sha256 is known for the file, so that it is not verified (`unverified_notice`).
    """
    if source not in SOURCES:
        raise DownloadError(f"unknown source {source!r}; use one of {', '.join(SOURCES)}")
    located = locate_file(model, cache_dir=cache_dir, models_dir=models_dir)
    usable = located is not None and source in ("auto", located.source)
    if located is not None and usable and verify_located(located, progress=progress, cancel=cancel):
        if not located.checkable and notify is not None:
            notify(unverified_notice(model.filename))
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
                notify=notify,
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
    """Make a catalog pair's files present and verified; returns their paths (a pair whose
    target's MTP head drafts has no draft file).

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
    return PairFiles(target=found["target"], draft=found.get("draft"))
