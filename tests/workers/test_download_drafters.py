"""Pairs whose drafter is not a draft model, fetched from the fake hub: an MTP pair is its target
alone, an assistant pair two files whose verdict is the assistant's, not a vocabulary's."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from specchat import paths
from specchat.models.catalog import load_catalog
from specchat.models.download import fetch_pair, resolve_pair_files
from specchat.workers.download_payloads import FetchRequest, PairFetched, PairStatus
from specchat.workers.download_worker import DownloadWorker
from tests.helpers import fake_hub
from tests.helpers.drafter_files import ASSISTANT_PAIR_ID, MTP_PAIR_ID, serve_drafter_pairs


@dataclass
class Env:
    hub: fake_hub.FakeHub
    cache: Path
    files: dict[str, Path]


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Env]:
    monkeypatch.setenv(paths.HOME_ENV, str(tmp_path / "home"))
    monkeypatch.setenv("SPECCHAT_MODEL_CACHE", str(tmp_path / "model-cache"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with fake_hub.serve() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        files = serve_drafter_pairs(hub, tmp_path / "served", paths.user_catalog_path())
        yield Env(hub, tmp_path / "hub", files)


def _surveyed(worker: DownloadWorker, pair_id: str) -> PairStatus:
    seen: list[PairStatus] = []
    worker.surveyed.connect(seen.append)
    worker._on_survey_requested((pair_id,))
    worker.surveyed.disconnect(seen.append)
    return seen[-1]


def test_an_mtp_pair_downloads_its_target_alone(env: Env) -> None:
    target = env.files["mtp_target"]
    files = fetch_pair(MTP_PAIR_ID, source="hub", cache_dir=env.cache)
    assert files.draft is None
    assert files.target.read_bytes() == target.read_bytes()
    gets = [r.path for r in env.hub.gets()]
    assert gets and all(path.endswith(f"/{target.name}") for path in gets)

    pair = load_catalog().get(MTP_PAIR_ID)
    assert resolve_pair_files(pair, cache_dir=env.cache) == files
    # Present now: a second fetch asks the hub for nothing.
    before = len(env.hub.gets())
    assert fetch_pair(MTP_PAIR_ID, source="hub", cache_dir=env.cache) == files
    assert len(env.hub.gets()) == before


def test_the_worker_fetches_and_surveys_an_mtp_pair(env: Env) -> None:
    worker = DownloadWorker(ask_hub_sizes=False)
    before = _surveyed(worker, MTP_PAIR_ID)
    assert before.draft is None and before.files == (before.target,)
    assert not before.ready and before.compatible is None

    finished: list[PairFetched] = []
    worker.finished.connect(finished.append)
    worker._on_fetch_requested(FetchRequest(MTP_PAIR_ID))
    [fetched] = finished
    assert fetched.draft is None and [check.role for check in fetched.checks] == ["target"]

    after = _surveyed(worker, MTP_PAIR_ID)
    assert after.ready and after.verified and after.compatible is True
    assert after.reason == "the target carries an MTP head (llama.nextn_predict_layers = 1)"


def test_an_assistant_pair_is_judged_by_its_assistant(env: Env) -> None:
    worker = DownloadWorker(ask_hub_sizes=False)
    finished: list[PairFetched] = []
    worker.finished.connect(finished.append)
    worker._on_fetch_requested(FetchRequest(ASSISTANT_PAIR_ID))
    [fetched] = finished
    assert fetched.draft is not None
    assert fetched.draft.read_bytes() == env.files["assistant"].read_bytes()
    status = _surveyed(worker, ASSISTANT_PAIR_ID)
    # No vocabulary to compare: a draft-model check would have refused it.
    assert status.ready and status.compatible is True and "gemma4-assistant" in status.reason
