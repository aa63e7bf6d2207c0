"""DownloadWorker: directly and on its thread, against the fake hub with the tiny models."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from PySide6.QtCore import QThread
from pytestqt.qtbot import QtBot

from specchat import paths
from specchat.models import hub_download as download
from specchat.models.catalog import load_catalog
from specchat.tinymodels import TinyModels
from specchat.workers.download_payloads import (
    FetchCancelled,
    FetchFailed,
    FetchRequest,
    FileProgress,
    LocalChecked,
    LocalCheckRequest,
    PairFetched,
    PairStatus,
)
from specchat.workers.download_worker import DownloadService, DownloadWorker
from tests.helpers import fake_hub
from tests.helpers.tiny_catalog import ODD_PAIR_ID, PAIR_ID, serve_tiny_pair


@dataclass
class Env:
    hub: fake_hub.FakeHub
    cache: Path
    tiny: TinyModels


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tiny_models: TinyModels) -> Iterator[Env]:
    monkeypatch.setenv(paths.HOME_ENV, str(tmp_path / "home"))
    monkeypatch.setenv("SPECCHAT_MODEL_CACHE", str(tmp_path / "model-cache"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with fake_hub.serve() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        serve_tiny_pair(hub, tiny_models, paths.user_catalog_path())
        yield Env(hub, tmp_path / "hub", tiny_models)


@pytest.fixture
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hand bytes to the file every 16 KiB, so a tiny model can be cut part-way."""
    from huggingface_hub import constants

    monkeypatch.setattr(download, "HUB_CHUNK", 16 * 1024)
    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 16 * 1024)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Recorder:
    """Collects every signal of a worker (direct connections: same thread)."""

    def __init__(self, source: DownloadWorker | DownloadService) -> None:
        self.events: dict[str, list[object]] = {}
        for name in (
            "progress",
            "notice",
            "finished",
            "failed",
            "cancelled",
            "discarded",
            "surveyed",
            "local_checked",
        ):
            self.events[name] = []
            getattr(source, name).connect(self.events[name].append)

    def __getitem__(self, name: str) -> list[object]:
        return self.events[name]


# --- directly -------------------------------------------------------------------------------


def test_worker_directly_fetches_a_pair_with_per_file_progress(env: Env) -> None:
    worker = DownloadWorker(ask_hub_sizes=False)
    seen = Recorder(worker)

    worker._on_fetch_requested(FetchRequest(PAIR_ID))

    assert seen["failed"] == []
    [fetched] = seen["finished"]
    assert isinstance(fetched, PairFetched)
    assert fetched.target.read_bytes() == env.tiny.target.read_bytes()
    assert fetched.draft.read_bytes() == env.tiny.draft_close.read_bytes()
    assert [c.sha256 for c in fetched.checks] == [_sha(env.tiny.target), _sha(env.tiny.draft_close)]
    assert fetched.target.is_relative_to(env.cache)  # HF_HUB_CACHE, read at call time
    progress = [e for e in seen["progress"] if isinstance(e, FileProgress)]
    for role, source in (("target", env.tiny.target), ("draft", env.tiny.draft_close)):
        mine = [e for e in progress if e.role == role]
        stages = [e.stage for e in mine]
        assert "download" in stages and "verify" in stages
        assert mine[-1].stage == "done" and mine[-1].fraction == 1.0
        downloads = [e for e in mine if e.stage == "download"]
        assert downloads[-1].done == downloads[-1].total == source.stat().st_size
        assert all(e.label == source.name for e in mine)


def test_worker_surveys_presence_partials_and_compatibility(env: Env) -> None:
    worker = DownloadWorker(ask_hub_sizes=False)
    seen = Recorder(worker)
    worker._on_survey_requested((PAIR_ID, ODD_PAIR_ID))
    before = {s.pair_id: s for s in seen["surveyed"] if isinstance(s, PairStatus)}
    assert not before[PAIR_ID].ready and before[PAIR_ID].compatible is None
    assert before[PAIR_ID].target.size == env.tiny.target.stat().st_size  # from the catalog
    assert before[PAIR_ID].draft.size is None  # left open in the catalog

    worker._on_fetch_requested(FetchRequest(PAIR_ID))
    worker._on_fetch_requested(FetchRequest(ODD_PAIR_ID))
    seen["surveyed"].clear()
    worker._on_survey_requested((PAIR_ID, ODD_PAIR_ID))

    after = {s.pair_id: s for s in seen["surveyed"] if isinstance(s, PairStatus)}
    good, odd = after[PAIR_ID], after[ODD_PAIR_ID]
    assert good.ready and good.compatible is True
    assert good.target.verified and good.draft.verified  # stamped by the fetch
    assert good.target.source == "hub"
    assert odd.compatible is False and not odd.ready
    assert "vocabulary" in odd.reason or "differ" in odd.reason


def test_worker_asks_the_hub_for_sizes_the_catalog_leaves_open(env: Env) -> None:
    worker = DownloadWorker(ask_hub_sizes=True)
    seen = Recorder(worker)
    worker._on_survey_requested((PAIR_ID,))
    statuses = [s for s in seen["surveyed"] if isinstance(s, PairStatus)]
    assert statuses[0].draft.size is None
    assert statuses[-1].draft.size == env.tiny.draft_close.stat().st_size
    assert env.hub.gets() == []  # sizes come from HEAD requests only


def test_worker_refuses_before_the_first_byte_without_disk_space(env: Env) -> None:
    worker = DownloadWorker(free_space=lambda _path: 10_000, ask_hub_sizes=False)
    seen = Recorder(worker)

    worker._on_fetch_requested(FetchRequest(PAIR_ID))

    [failure] = seen["failed"]
    assert isinstance(failure, FetchFailed) and failure.no_space
    assert "not enough disk space" in failure.message.lower()
    assert env.hub.file_requests() == []  # the catalog's size sufficed: not even a HEAD


def test_worker_reports_a_failure_and_keeps_running(env: Env) -> None:
    worker = DownloadWorker(ask_hub_sizes=False)
    seen = Recorder(worker)
    env.hub.files.clear()  # the hub lost the files

    worker._on_fetch_requested(FetchRequest(PAIR_ID))

    [failure] = seen["failed"]
    assert isinstance(failure, FetchFailed) and "not found" in failure.message
    assert failure.message.endswith(".")


def test_worker_checks_local_files(env: Env) -> None:
    worker = DownloadWorker(ask_hub_sizes=False)
    seen = Recorder(worker)
    tiny = env.tiny
    junk = env.cache.parent / "junk.gguf"
    junk.write_bytes(b"not a gguf at all")

    worker._on_local_check_requested(LocalCheckRequest(tiny.target, tiny.draft_close))
    worker._on_local_check_requested(LocalCheckRequest(tiny.target, tiny.odd_vocab))
    worker._on_local_check_requested(LocalCheckRequest(tiny.target, None))
    worker._on_local_check_requested(LocalCheckRequest(junk, None))

    good, odd, alone, bad = seen["local_checked"]
    assert isinstance(good, LocalChecked) and good.ok
    assert isinstance(odd, LocalChecked) and not odd.ok and odd.reason
    assert isinstance(alone, LocalChecked) and alone.ok and "lookup" in alone.reason
    assert isinstance(bad, LocalChecked) and not bad.ok and "junk.gguf" in bad.reason


# --- on its thread -----------------------------------------------------------------------------


@pytest.fixture
def service(qtbot: QtBot, env: Env) -> Iterator[DownloadService]:
    svc = DownloadService(ask_hub_sizes=False)
    svc.start()
    yield svc
    assert svc.shutdown(timeout_s=5.0)


def test_service_fetches_on_its_thread_and_reports_on_the_ui_thread(
    qtbot: QtBot, service: DownloadService, env: Env
) -> None:
    threads: set[object] = set()
    service.progress.connect(lambda _e: threads.add(QThread.currentThread()))

    with qtbot.waitSignal(service.finished, timeout=30_000) as blocker:
        service.fetch(FetchRequest(PAIR_ID))

    fetched = blocker.args[0]
    assert isinstance(fetched, PairFetched)
    assert _sha(fetched.target) == _sha(env.tiny.target)
    assert threads == {QThread.currentThread()}  # the UI (test) thread, never the worker's
    assert service.worker.thread() is service.worker_thread
    assert not service.busy


def test_service_cancel_keeps_the_partial_and_the_next_fetch_resumes(
    qtbot: QtBot, service: DownloadService, env: Env, small_pieces: None
) -> None:
    env.hub.chunk = 16 * 1024
    env.hub.faults.chunk_delay = 0.05  # ~300 KB/s: seconds for the tiny target

    def under_way(event: FileProgress) -> bool:
        return event.stage == "download" and event.done >= 48 * 1024

    with qtbot.waitSignal(service.progress, timeout=30_000, check_params_cb=under_way):
        service.fetch(FetchRequest(PAIR_ID))
    with qtbot.waitSignal(service.cancelled, timeout=10_000) as blocker:
        service.cancel()

    cancelled = blocker.args[0]
    assert isinstance(cancelled, FetchCancelled) and cancelled.pair_id == PAIR_ID
    target = load_catalog().get(PAIR_ID).target
    partial = download.find_partial(target, cache_dir=env.cache)
    assert partial is not None and cancelled.kept == partial.done > 0
    assert not service.busy

    env.hub.faults.chunk_delay = 0.0
    with qtbot.waitSignal(service.finished, timeout=30_000) as done:
        service.fetch(FetchRequest(PAIR_ID))

    assert _sha(done.args[0].target) == _sha(env.tiny.target)
    target_gets = [r for r in env.hub.gets() if env.tiny.target.name in r.path]
    assert target_gets[-1].range == f"bytes={partial.done}-"


def test_service_discards_a_partial_on_request(
    qtbot: QtBot, service: DownloadService, env: Env, small_pieces: None
) -> None:
    env.hub.chunk = 16 * 1024
    env.hub.faults.chunk_delay = 0.05

    def under_way(event: FileProgress) -> bool:
        return event.stage == "download" and event.done >= 48 * 1024

    with qtbot.waitSignal(service.progress, timeout=30_000, check_params_cb=under_way):
        service.fetch(FetchRequest(PAIR_ID))
    with qtbot.waitSignal(service.cancelled, timeout=10_000):
        service.cancel()
    with qtbot.waitSignal(service.discarded, timeout=10_000) as blocker:
        service.discard(PAIR_ID)

    assert blocker.args == [PAIR_ID]
    target = load_catalog().get(PAIR_ID).target
    assert download.find_partial(target, cache_dir=env.cache) is None
    assert not list(env.cache.rglob("*.incomplete"))


def test_service_shutdown_mid_download_is_bounded_and_keeps_the_partial(
    qtbot: QtBot, env: Env, small_pieces: None
) -> None:
    env.hub.chunk = 16 * 1024
    env.hub.faults.chunk_delay = 0.05
    svc = DownloadService(ask_hub_sizes=False)
    svc.start()

    def under_way(event: FileProgress) -> bool:
        return event.stage == "download" and event.done >= 48 * 1024

    with qtbot.waitSignal(svc.progress, timeout=30_000, check_params_cb=under_way):
        svc.fetch(FetchRequest(PAIR_ID))
    assert svc.shutdown(timeout_s=3.0)
    assert svc.worker_thread.isFinished()
    target = load_catalog().get(PAIR_ID).target
    partial = download.find_partial(target, cache_dir=env.cache)
    assert partial is not None and partial.done > 0
