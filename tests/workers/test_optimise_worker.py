"""OptimiseWorker directly: target files of a pair, a refused disk, and which target loads."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from specchat import paths
from specchat.assembly.quality_bench import QualityBench
from specchat.models.catalog import parse_catalog
from specchat.tinymodels import TinyModels
from specchat.workers.generation import GenerationWorker
from specchat.workers.optimise_worker import OptimiseEnded, OptimiseWorker, target_choices

CATALOG = """\
schema = 1

[[pair]]
id = "tiny"
name = "Tiny"

[pair.target]
repo = "t/t-GGUF"
file = "tiny-target.gguf"

[pair.cpu_target]
repo = "t/t-GGUF"
file = "tiny-target-q4_0.gguf"
quantisation = "Q4_0"

[pair.draft]
repo = "t/t-GGUF"
file = "tiny-draft-close.gguf"
"""


@pytest.fixture
def tiny_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tiny_models: TinyModels) -> Path:
    monkeypatch.setenv(paths.HOME_ENV, str(tmp_path / "home"))
    monkeypatch.setenv("SPECCHAT_MODEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    paths.user_catalog_path().parent.mkdir(parents=True)
    paths.user_catalog_path().write_text(CATALOG, encoding="utf-8")
    paths.models_dir().mkdir(parents=True)
    for path in (tiny_models.target, tiny_models.draft_close):
        shutil.copy(path, paths.models_dir() / path.name)
    return paths.models_dir()


def test_not_enough_disk_is_said_and_nothing_is_written(tiny_home: Path) -> None:
    worker = OptimiseWorker(quality=QualityBench(), free_space=lambda _folder: 1000)
    ended: list[OptimiseEnded] = []
    worker.ended.connect(ended.append)
    worker._on_optimise_requested("tiny")
    assert len(ended) == 1 and not ended[0].ok and not ended[0].cancelled
    assert "not enough disk space" in ended[0].message
    assert not list(tiny_home.glob("*derived*"))


def test_choices_then_the_chosen_target_is_what_loads(tiny_home: Path) -> None:
    choices = target_choices("tiny", quality=QualityBench())
    assert [o.variant for o in choices.options] == ["target", "cpu"]
    assert choices.options[1].path is None and "price of 2" in choices.options[1].reason
    worker = OptimiseWorker(quality=QualityBench())
    ended: list[OptimiseEnded] = []
    worker.ended.connect(ended.append)
    worker._on_optimise_requested("tiny")
    assert ended[0].ok and ended[0].path is not None
    choices = target_choices("tiny", quality=QualityBench())
    assert [o.variant for o in choices.options] == ["target", "cpu", "optimised"]
    assert choices.quality and "next-token agreement" in choices.quality[0]
    # The generation worker resolves the variant the settings name, or falls back.
    (pair,) = parse_catalog(CATALOG)
    assert GenerationWorker._variant(pair, "optimised") == ended[0].path
    assert GenerationWorker._variant(pair, "cpu") is None  # not downloaded: shipped loads
    assert GenerationWorker._variant(pair, "nonsense") is None
