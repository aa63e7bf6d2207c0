"""`specchat models fetch ID --cpu-target`: the catalog's CPU-format target from the hub."""

from __future__ import annotations

from pathlib import Path

import pytest

from specchat import paths
from specchat.models.catalog import load_catalog
from specchat.models.optimise import optimise
from specchat.models.target_files import TargetVariant, resolve_target
from specchat.tinymodels import TinyModels
from tests.helpers import fake_hub
from tests.helpers.models_cli import run_cli

REPO = "specchat-tests/tiny-GGUF"


def test_fetch_with_the_cpu_target(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    tiny_models: TinyModels,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("SPECCHAT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("SPECCHAT_MODEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    q4 = optimise(tiny_models.target, output=tmp_path / "tiny-target-q4_0.gguf").path
    with fake_hub.serve() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        for path in (tiny_models.target, tiny_models.draft_close, q4):
            hub.add(REPO, path.name, path.read_bytes())
        catalog = paths.user_catalog_path()
        catalog.parent.mkdir(parents=True)
        lines = ["[[pair]]", 'id = "tiny"', 'name = "Tiny"']
        for role, path in (("target", tiny_models.target), ("cpu_target", q4)):
            lines += [f"[pair.{role}]", f'repo = "{REPO}"', f'file = "{path.name}"']
        lines += ["[pair.draft]", f'repo = "{REPO}"', f'file = "{tiny_models.draft_close.name}"']
        catalog.write_text("\n".join(lines) + "\n", encoding="utf-8")
        assert run_cli("fetch", "tiny", "--cpu-target", "--source", "hub") == 0
        out = capsys.readouterr().out
        assert "cpu    tiny-target-q4_0.gguf: downloaded" in out
        pair = load_catalog().get("tiny")
        found = resolve_target(pair, TargetVariant.CPU)
        assert found is not None and found.read_bytes() == q4.read_bytes()
        # `default`-like pairs without one say so.
        catalog.write_text(
            catalog.read_text().split("[pair.cpu_target]")[0]
            + "\n".join(
                ["[pair.draft]", f'repo = "{REPO}"', f'file = "{tiny_models.draft_close.name}"']
            )
            + "\n",
            encoding="utf-8",
        )
        assert run_cli("fetch", "tiny", "--cpu-target", "--source", "hub") == 2
        assert "names no CPU-format target" in capsys.readouterr().err
