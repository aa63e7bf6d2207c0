"""The picker's target files: "Optimise for this CPU" on the tiny target, and which file runs."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from specchat import paths
from specchat import settings as cfg
from specchat.settings import Settings
from specchat.tinymodels import TinyModels
from specchat.ui.pairs.model_picker import ModelPicker
from specchat.workers.optimise_worker import OptimiseEnded, TargetChoices
from tests.helpers import fake_hub
from tests.helpers.tiny_catalog import PAIR_ID, serve_tiny_pair


@pytest.fixture
def picker(
    qtbot: QtBot,
    monkeypatch: pytest.MonkeyPatch,
    home: Path,
    tmp_path: Path,
    tiny_models: TinyModels,
) -> Iterator[ModelPicker]:
    monkeypatch.setenv("SPECCHAT_MODEL_CACHE", str(tmp_path / "model-cache"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    with fake_hub.serve() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        serve_tiny_pair(hub, tiny_models, paths.user_catalog_path())
        paths.models_dir().mkdir(parents=True)
        for path in (tiny_models.target, tiny_models.draft_close):
            shutil.copy(path, paths.models_dir() / path.name)
        made = ModelPicker(None, settings=Settings(), ask_hub_sizes=False)
        qtbot.addWidget(made)
        yield made
        made.service.shutdown(timeout_s=5.0)
        made.optimiser.shutdown(timeout_s=5.0)


def _for(pair_id: str):  # type: ignore[no-untyped-def]
    return lambda choices: isinstance(choices, TargetChoices) and choices.pair_id == pair_id


def test_optimise_for_this_cpu_then_choose_the_copy(qtbot: QtBot, picker: ModelPicker) -> None:
    with qtbot.waitSignal(picker.optimiser.surveyed, timeout=20_000, check_params_cb=_for(PAIR_ID)):
        picker.select(PAIR_ID)
    chooser = picker.targets
    assert chooser.isVisibleTo(picker)
    assert set(chooser.options) == {"target"} and chooser.options["target"].isChecked()
    assert "tiny-target.gguf" in chooser.runs.text()
    assert chooser.optimise_button.isEnabled()
    with qtbot.waitSignal(picker.optimiser.ended, timeout=120_000) as ended:
        qtbot.mouseClick(chooser.optimise_button, Qt.MouseButton.LeftButton)
        assert chooser.cancel_button.isVisibleTo(picker) and chooser.bar.isVisibleTo(picker)
    done: OptimiseEnded = ended.args[0]
    assert done.ok and done.path is not None and done.path.is_file()
    assert done.path.parent == paths.models_dir()
    assert any("next-token agreement" in line for line in done.quality)
    assert "Choose it under Target file" in picker.details.message.text()
    qtbot.waitUntil(lambda: "optimised" in chooser.options, timeout=20_000)
    assert "agreement" in chooser.reasons.text() and "single quantisation" in chooser.reasons.text()
    assert chooser.options["target"].isChecked()  # making a copy does not switch to it
    chooser.options["optimised"].click()
    assert picker._settings is not None
    assert picker._settings.get(cfg.TARGET_FILE) == "optimised"
    assert "derived-q4_0" in chooser.runs.text()
    assert chooser.optimise_button.text() == "Optimise again"


def test_cancel_keeps_nothing(qtbot: QtBot, picker: ModelPicker) -> None:
    with qtbot.waitSignal(picker.optimiser.surveyed, timeout=20_000, check_params_cb=_for(PAIR_ID)):
        picker.select(PAIR_ID)
    # The click lands while the child process starts (a spawn takes far longer than it).
    with qtbot.waitSignal(picker.optimiser.ended, timeout=60_000) as ended:
        picker.start_optimise()
        picker.targets.cancel_button.click()
    assert ended.args[0].cancelled and not ended.args[0].ok
    assert not list(paths.models_dir().glob("*derived*"))
    assert "no partial file was kept" in picker.details.message.text()


def test_another_pair_never_shows_the_previous_pairs_files(
    qtbot: QtBot, picker: ModelPicker
) -> None:
    with qtbot.waitSignal(picker.optimiser.surveyed, timeout=20_000, check_params_cb=_for(PAIR_ID)):
        picker.select(PAIR_ID)
    assert picker.targets.isVisibleTo(picker)
    # The other pairs' statuses come from the picker's own survey, on its own schedule.
    qtbot.waitUntil(lambda: any(key != PAIR_ID for key in picker.statuses), timeout=20_000)
    other = next(key for key in picker.statuses if key != PAIR_ID)
    picker.select(other)
    # Until the other pair's own survey arrives, nothing of the first pair is on show.
    assert not picker.targets.isVisibleTo(picker) or picker.targets.shown_pair() == other
