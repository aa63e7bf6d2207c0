"""The pair loader without a window: only the current load's news passes, reload repeats."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from specchat import settings as cfg
from specchat.settings import Settings
from specchat.tinymodels import TinyModels
from specchat.ui.pairs.model_picker import LocalPair
from specchat.ui.pairs.pair_loader import PairLoader, local_pair
from specchat.workers.generation import (
    Failure,
    Loaded,
    LoadProgressUpdate,
    LoadRequest,
)
from specchat.workers.generation_service import GenerationService


@pytest.fixture
def loader(service: GenerationService, tmp_path: Path) -> PairLoader:
    settings = Settings(tmp_path / "settings.json")
    settings.set(cfg.CALIBRATE_PLAIN, False)
    settings.set(cfg.N_CTX, 1024)
    return PairLoader(service=service, settings=settings)


def _load(loader: PairLoader, target: Path, draft: Path | None, label: str) -> None:
    loader.load(target_gpu_layers=0, draft_gpu_layers=0, **local_pair(target, draft, label=label))


def test_news_of_a_superseded_load_is_ignored(
    qtbot: QtBot, loader: PairLoader, tiny_models: TinyModels
) -> None:
    started: list[LoadRequest] = []
    finished: list[Loaded] = []
    progress: list[LoadProgressUpdate] = []
    loader.started.connect(started.append)
    loader.finished.connect(finished.append)
    loader.progress.connect(progress.append)
    with qtbot.waitSignal(loader.finished, timeout=30_000):
        _load(loader, tiny_models.target, tiny_models.draft_close, "close")
    close = finished[0]
    assert loader.loaded is close and not loader.loading and progress
    _load(loader, tiny_models.target, tiny_models.draft_far, "far")
    assert loader.loading and loader.loaded is None
    # The first load's news arriving late (its id is no longer current) passes nowhere.
    seen = len(progress)
    loader.service.load_progress.emit(LoadProgressUpdate(close.load_id, "target", 0.5))
    loader.service.loaded.emit(close)
    assert len(progress) == seen and finished == [close] and loader.loaded is None
    with qtbot.waitSignal(loader.finished, timeout=30_000):
        pass
    assert [r.label for r in started] == ["close", "far"]
    assert [f.label for f in finished] == ["close", "far"]
    far = finished[1]
    assert loader.loaded is far and far.info.draft is not None
    assert far.info.draft.path == tiny_models.draft_far
    assert loader.reload() == {
        "target": tiny_models.target,
        "draft": tiny_models.draft_far,
        "pair_id": None,
        "label": "far",
    }


def test_a_failed_load_is_reported_once_and_ends_loading(
    qtbot: QtBot, loader: PairLoader, tmp_path: Path
) -> None:
    with qtbot.waitSignal(loader.failed, timeout=30_000) as blocker:
        _load(loader, tmp_path / "missing.gguf", None, "missing")
    failure: Failure = blocker.args[0]
    assert failure.message and "Traceback" not in failure.message
    assert not loader.loading and loader.loaded is None


def test_a_chosen_local_pair_is_remembered_once_loaded_and_loaded_from_settings(
    qtbot: QtBot, loader: PairLoader, tiny_models: TinyModels
) -> None:
    choice = LocalPair("mine", tiny_models.target, None)
    what = loader.choose(choice)
    assert what == {"target": tiny_models.target, "draft": None, "label": "mine"}
    # Only a pair that loaded is remembered: a broken choice never comes back at start.
    assert loader.settings.get(cfg.PAIR_ID) == "default"
    with qtbot.waitSignal(loader.finished, timeout=30_000):
        loader.load(target_gpu_layers=0, draft_gpu_layers=0, **what)
    assert loader.settings.get(cfg.PAIR_ID) == "custom"
    assert loader.from_settings() == {
        "target": tiny_models.target,
        "draft": None,
        "label": "Local pair",
    }
    assert loader.choose(object()) is None  # names no files
