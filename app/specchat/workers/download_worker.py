"""DownloadWorker: fetches model pairs and surveys what is on disk, off the UI thread."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from PySide6.QtCore import QObject, Signal, Slot

from specchat.models.catalog import Catalog, ModelFile, ModelPair, load_catalog
from specchat.models.transfer import (
    DownloadCancelled,
    DownloadError,
    DownloadProgress,
    FreeSpace,
    NotEnoughSpace,
    ensure_space,
    read_stamp,
)
from specchat.workers.download_payloads import (
    FetchCancelled,
    FetchFailed,
    FetchRequest,
    FileCheck,
    FileProgress,
    FileStatus,
    LocalChecked,
    LocalCheckRequest,
    PairFetched,
    PairStatus,
)
from specchat.workers.lifecycle import WorkerLifecycle

log = logging.getLogger(__name__)

ROLES = ("target", "draft")


def _expected_size(model: ModelFile) -> int | None:
    if model.size is not None:
        return model.size
    return model.mirror.size if model.mirror is not None else None


class DownloadWorker(QObject):
    """Fetches catalog pairs (hub, falling back to the mirror) and reports what is on disk.

    Every slot runs on the worker's thread; `cancel()` may be called from any thread and is
    seen within one downloaded chunk.

    Attributes:
        catalog: the catalog pairs are looked up in.
        cache_dir: the hub cache (None: the hub's own default, read at call time).
        models_dir: the folder of mirror-assembled files (None: SpecChat's).

    Signals:
        progress(FileProgress): a file of the pair being fetched advanced.
        notice(str): something the user should know, e.g. the mirror replaced the hub.
        finished(PairFetched): every file of the pair is present and verified.
        failed(FetchFailed): the fetch failed; the message is for people.
        cancelled(FetchCancelled): the user cancelled; partials are kept.
        discarded(str): the partial downloads of this pair id were deleted.
        surveyed(PairStatus): the on-disk state of one pair.
        local_checked(LocalChecked): the verdict on files from disk.
        closed(): the worker is done; its thread may quit.
    """

    progress = Signal(FileProgress)
    notice = Signal(str)
    finished = Signal(PairFetched)
    failed = Signal(FetchFailed)
    cancelled = Signal(FetchCancelled)
    discarded = Signal(str)
    surveyed = Signal(PairStatus)
    local_checked = Signal(LocalChecked)
    closed = Signal()

    def __init__(
        self,
        *,
        catalog: Catalog | None = None,
        cache_dir: Path | None = None,
        models_dir: Path | None = None,
        free_space: FreeSpace | None = None,
        endpoint: str | None = None,
        ask_hub_sizes: bool = True,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.catalog = catalog
        self.cache_dir = cache_dir
        self.models_dir = models_dir
        self._free_space = free_space
        self._endpoint = endpoint
        self._ask_hub_sizes = ask_hub_sizes
        # Set directly from the UI thread: a queued request would wait behind the download.
        self._cancel = threading.Event()
        self._survey_stop = threading.Event()

    # --- thread-safe entry points ---------------------------------------------------------
    def cancel(self) -> None:
        """Stop the fetch in progress at its next chunk (callable from any thread)."""
        self._cancel.set()

    def rearm(self) -> None:
        """Forget a cancel that came when nothing ran (called before queueing a fetch)."""
        self._cancel.clear()

    def interrupt_survey(self) -> None:
        """Skip the survey's remaining hub questions so a queued fetch starts at once."""
        self._survey_stop.set()

    # --- helpers ----------------------------------------------------------------------------
    def _catalog(self) -> Catalog:
        if self.catalog is None:
            self.catalog = load_catalog()
        return self.catalog

    def _hub_cache(self) -> Path:
        from specchat.models.download import hub_cache_dir

        return self.cache_dir if self.cache_dir is not None else hub_cache_dir()

    def _file_status(self, role: str, model: ModelFile, cache: Path) -> FileStatus:
        from specchat.models.download import find_partial, locate_file

        size = _expected_size(model)
        located = locate_file(model, cache_dir=cache, models_dir=self.models_dir)
        if located is None:
            partial = find_partial(model, cache_dir=cache)
            if partial is None:
                return FileStatus(role, model.filename, size)
            # The hub named the size when the partial began, even if the catalog does not.
            return FileStatus(role, model.filename, size or partial.total, partial=partial.done)
        # The stamp answers without hashing gigabytes; an unstamped file is verified when
        # it is fetched (or loaded), never here.
        stamp = read_stamp(located.path)
        verified = stamp is not None and (located.sha256 is None or stamp == located.sha256)
        return FileStatus(
            role,
            model.filename,
            located.size if located.size is not None else located.path.stat().st_size,
            path=located.path,
            source=located.source,
            verified=verified,
        )

    def pair_status(self, pair: ModelPair, *, ask_hub: bool = False) -> PairStatus:
        """The on-disk state of `pair` (and its drafter's verdict when every file is there)."""
        cache = self._hub_cache()
        files = {role: self._file_status(role, model, cache) for role, model in pair.files()}
        if ask_hub:
            from dataclasses import replace

            from specchat.models.download import hub_size

            for role, model in pair.files():
                if files[role].size is None:
                    files[role] = replace(
                        files[role], size=hub_size(model, endpoint=self._endpoint, timeout=3.0)
                    )
        target, draft = files["target"], files.get("draft")
        status = PairStatus(pair.id, target, draft)
        if not status.present or target.path is None:
            return status
        draft_path = None if draft is None else draft.path
        from specchat.models.compat import damaged_file

        problem = damaged_file(target.path, draft_path)
        if problem:
            return PairStatus(pair.id, target, draft, False, problem, damaged=True)
        from specchat.models.drafter_check import check_drafter

        verdict = check_drafter(pair.drafter, target.path, draft_path)
        return PairStatus(pair.id, target, draft, verdict.ok, verdict.reason)

    # --- slots ------------------------------------------------------------------------------
    @Slot(object)
    def _on_survey_requested(self, pair_ids: tuple[str, ...] | None) -> None:
        """Report every pair's on-disk state, quickest facts first."""
        try:
            catalog = self._catalog()
            pairs = [catalog.get(pid) for pid in pair_ids] if pair_ids else list(catalog)
        except Exception as error:  # a broken user catalog: say so, do not crash the thread
            self.notice.emit(f"The model catalog cannot be read: {error}")
            return
        late = []
        for pair in pairs:
            try:
                status = self.pair_status(pair)
            except Exception:
                log.exception("surveying %s failed", pair.id)
                continue
            self.surveyed.emit(status)
            if self._ask_hub_sizes and any(file.size is None for file in status.files):
                late.append(pair)
        # Sizes the catalog leaves open come from the hub (a HEAD each), after every pair
        # has shown what is on disk, so an offline hub never delays the list.
        for pair in late:
            if self._survey_stop.is_set():
                break
            try:
                self.surveyed.emit(self.pair_status(pair, ask_hub=True))
            except Exception:
                log.debug("hub sizes for %s failed", pair.id, exc_info=True)

    @Slot(LocalCheckRequest)
    def _on_local_check_requested(self, request: LocalCheckRequest) -> None:
        from specchat.models.compat import check_compatible, damaged_file
        from specchat.models.gguf_format import GGUFError
        from specchat.models.gguf_reader import read_metadata

        problem = damaged_file(request.target, request.draft)
        try:
            if problem:
                ok, reason = False, problem
            elif request.draft is None:
                read_metadata(request.target, keys=("general.architecture",))
                ok, reason = True, "no draft model: prompt lookup only"
            else:
                verdict = check_compatible(request.target, request.draft)
                ok, reason = verdict.ok, verdict.reason
        except (GGUFError, OSError) as error:
            ok, reason = False, f"cannot read {request.target.name}: {error}"
        self.local_checked.emit(LocalChecked(request.target, request.draft, ok, reason))

    @Slot(FetchRequest)
    def _on_fetch_requested(self, request: FetchRequest) -> None:
        # A survey queued behind this fetch may ask the hub again.
        self._survey_stop.clear()
        pair_id = request.pair_id
        try:
            files = self._fetch(request)
        except DownloadCancelled:
            self._cancel.clear()  # consumed: the next fetch starts afresh
            self.cancelled.emit(FetchCancelled(pair_id, self._kept(pair_id)))
        except NotEnoughSpace as error:
            self.failed.emit(FetchFailed(pair_id, _sentence(error), no_space=True))
        except DownloadError as error:
            self.failed.emit(FetchFailed(pair_id, _sentence(error)))
        except Exception as error:  # the worker thread must survive anything a fetch raises
            log.exception("fetching %s failed", pair_id)
            self.failed.emit(FetchFailed(pair_id, f"Fetching failed unexpectedly: {error}"))
        else:
            self.finished.emit(files)

    @Slot(str)
    def _on_discard_requested(self, pair_id: str) -> None:
        from specchat.models.download import delete_partial

        try:
            pair = self._catalog().get(pair_id)
            cache = self._hub_cache()
            for _role, model in pair.files():
                delete_partial(model, cache_dir=cache)
        except Exception:
            log.exception("discarding partials of %s failed", pair_id)
        self.discarded.emit(pair_id)

    @Slot()
    def _on_shutdown_requested(self) -> None:
        self.closed.emit()

    # --- the fetch itself ---------------------------------------------------------------------
    def _fetch(self, request: FetchRequest) -> PairFetched:
        from specchat.models.download import fetch_file

        pair = self._catalog().get(request.pair_id)
        cache = self._hub_cache()
        self._check_space(pair, cache)
        checks: dict[str, FileCheck] = {}
        for role, model in pair.files():

            def report(event: DownloadProgress, role: str = role) -> None:
                self.progress.emit(FileProgress(**vars(event), pair_id=pair.id, role=role))

            path = fetch_file(
                model,
                source=request.source,
                cache_dir=cache,
                models_dir=self.models_dir,
                endpoint=self._endpoint,
                progress=report,
                cancel=self._cancel,
                free_space=self._free_space,
                notify=self.notice.emit,
            )
            size = path.stat().st_size
            report(DownloadProgress(model.filename, "done", size, size, 0.0, 0.0, True))
            checks[role] = FileCheck(role, path, read_stamp(path))
        draft = checks.get("draft")
        return PairFetched(
            pair.id,
            checks["target"].path,
            None if draft is None else draft.path,
            tuple(checks.values()),
        )

    def _check_space(self, pair: ModelPair, cache: Path) -> None:
        """Refuse before the first byte when the known sizes already do not fit."""
        needed = 0
        for role, model in pair.files():
            status = self._file_status(role, model, cache)
            if status.present or status.size is None:
                continue  # unknown sizes are checked per file once the hub names them
            needed += max(0, status.size - status.partial)
        if needed:
            ensure_space(needed, cache, free_space=self._free_space, what=f"“{pair.name}”")

    def _kept(self, pair_id: str) -> int:
        from specchat.models.download import find_partial

        try:
            pair = self._catalog().get(pair_id)
            cache = self._hub_cache()
            found = [find_partial(model, cache_dir=cache) for _role, model in pair.files()]
        except Exception:
            return 0
        return sum(p.done for p in found if p is not None)


def _sentence(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


class DownloadService(QObject):
    """A DownloadWorker on its own QThread, driven through queued signals.

    Attributes:
        worker: the worker (lives on `worker_thread`).
        worker_thread: the worker's thread (not `thread`: that is QObject's own method).
        busy: a fetch is under way.

    Signals:
        survey_requested(tuple | None), fetch_requested(FetchRequest),
        discard_requested(str), local_check_requested(LocalCheckRequest),
        shutdown_requested(): queued to the worker.
        progress, notice, finished, failed, cancelled, discarded, surveyed, local_checked:
            the worker's signals of the same names, re-emitted on the UI thread.
    """

    survey_requested = Signal(object)  # tuple of pair ids, or None for all: no one Qt type
    fetch_requested = Signal(FetchRequest)
    discard_requested = Signal(str)
    local_check_requested = Signal(LocalCheckRequest)
    shutdown_requested = Signal()
    progress = Signal(FileProgress)
    notice = Signal(str)
    finished = Signal(PairFetched)
    failed = Signal(FetchFailed)
    cancelled = Signal(FetchCancelled)
    discarded = Signal(str)
    surveyed = Signal(PairStatus)
    local_checked = Signal(LocalChecked)

    def __init__(
        self,
        *,
        catalog: Catalog | None = None,
        cache_dir: Path | None = None,
        models_dir: Path | None = None,
        free_space: FreeSpace | None = None,
        endpoint: str | None = None,
        ask_hub_sizes: bool = True,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.worker = DownloadWorker(
            catalog=catalog,
            cache_dir=cache_dir,
            models_dir=models_dir,
            free_space=free_space,
            endpoint=endpoint,
            ask_hub_sizes=ask_hub_sizes,
        )
        self._lifecycle = WorkerLifecycle("specchat-download")
        self.worker_thread = self._lifecycle.thread
        self.busy = False

    def start(self) -> None:
        """Wire the whole lifecycle in one place and start the thread."""
        worker = self.worker
        self._lifecycle.start(
            self,
            worker,
            requests=[
                (self.survey_requested, worker._on_survey_requested),
                (self.fetch_requested, worker._on_fetch_requested),
                (self.discard_requested, worker._on_discard_requested),
                (self.local_check_requested, worker._on_local_check_requested),
                (self.shutdown_requested, worker._on_shutdown_requested),
            ],
            relayed=(
                "progress",
                "notice",
                "finished",
                "failed",
                "cancelled",
                "discarded",
                "surveyed",
                "local_checked",
            ),
        )
        for name in ("finished", "failed", "cancelled"):
            getattr(self, name).connect(self._on_fetch_ended)

    # --- requests ------------------------------------------------------------------------
    def survey(self, pair_ids: tuple[str, ...] | None = None) -> None:
        self.survey_requested.emit(pair_ids)

    def fetch(self, request: FetchRequest) -> None:
        self.busy = True
        self.worker.rearm()
        self.worker.interrupt_survey()
        self.fetch_requested.emit(request)

    def cancel(self) -> None:
        self.worker.cancel()

    def discard(self, pair_id: str) -> None:
        self.discard_requested.emit(pair_id)

    def check_local(self, request: LocalCheckRequest) -> None:
        self.local_check_requested.emit(request)

    def shutdown(self, *, timeout_s: float = 3.0) -> bool:
        """Cancel a fetch (its partial is kept), stop the thread and wait at most `timeout_s`."""

        def cancel() -> None:
            self.worker.cancel()
            self.worker.interrupt_survey()

        return self._lifecycle.stop(
            cancel=cancel,
            request_shutdown=self.shutdown_requested.emit,
            timeout_s=timeout_s,
        )

    @Slot(object)
    def _on_fetch_ended(self, _payload: object) -> None:
        self.busy = False
