"""`specchat bench --via-api` on the tiny pair: each prompt direct and through the API, the
same answer both ways, and a report with the overhead ratio."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specchat.cli import main
from specchat.tinymodels import TinyModels


def test_via_api_compares_each_prompt_and_writes_the_report(
    tiny_models: TinyModels, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prompts = tmp_path / "prompts.jsonl"
    lines = [
        {"id": "plain-ask", "user": "hello there"},
        {"id": "with-prediction", "user": "hello there", "prediction": "hello there, hello"},
    ]
    prompts.write_text("\n".join(json.dumps(line) for line in lines), encoding="utf-8")
    out = tmp_path / "out"
    code = main(
        [
            "bench",
            "--target",
            str(tiny_models.target),
            "--draft",
            str(tiny_models.draft_close),
            "--prompts",
            str(prompts),
            "--via-api",
            "--max-tokens",
            "24",
            "--threads",
            "1",
            "--ctx",
            "512",
            "--out",
            str(out),
        ]
    )
    printed = capsys.readouterr().out
    report = json.loads((out / "via-api.json").read_text(encoding="utf-8"))
    assert [p["prompt"] for p in report["prompts"]] == ["plain-ask", "with-prediction"]
    assert report["all_same_text"] is True
    assert all(p["tokens"] > 0 and p["api_s"] > 0 for p in report["prompts"])
    assert report["api_vs_direct_geomean"] > 0
    assert "API ÷ direct" in printed
    # Tiny answers take milliseconds, where HTTP's own time shows: only the real pair's
    # ratio is a measurement, so the exit status is not judged here.
    assert code in (0, 1)
