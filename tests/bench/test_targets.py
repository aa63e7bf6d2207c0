"""`specchat bench --targets`: two real targets in one run, compared side by side."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specchat.bench.live.targets import compare_targets, render_comparison
from specchat.cli import main
from specchat.models.optimise import optimise
from specchat.tinymodels import TinyModels
from tests.helpers.bench_prompts import write_prompts


def test_two_targets_side_by_side(
    tiny_models: TinyModels, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    q4 = optimise(tiny_models.target, output=tmp_path / "tiny-target.derived-q4_0.gguf").path
    out = tmp_path / "out"
    argv = [
        "bench",
        "--targets",
        f"{tiny_models.target},{q4}",
        "--draft",
        str(tiny_models.draft_close),
        "--prompts",
        str(write_prompts(tmp_path)),
        "--modes",
        "plain,auto",
        "--temperature",
        "0",
        "--max-tokens",
        "10",
        "--threads",
        "1",
        "--ctx",
        "512",
        "--no-floor",
        "--out",
        str(out),
    ]
    assert main(argv) in (0, 1)  # 1: a speed goal failed, as tiny random models may
    printed = capsys.readouterr().out
    assert "tiny-target " in printed and "tiny-target.derived-q4_0" in printed
    # Each target keeps its own full report, and the comparison sits beside them.
    for folder in ("tiny-target", "tiny-target.derived-q4_0"):
        assert (out / folder / "report.json").is_file()
    comparison = json.loads((out / "targets.json").read_text(encoding="utf-8"))
    assert comparison["targets"] == ["tiny-target", "tiny-target.derived-q4_0"]
    first, second = comparison["rows"]
    assert first["file"] == "tiny-target.gguf" and "Q4_0" in second["description"]
    # Against itself the first target's plain is 1 exactly; the second is a real ratio.
    assert first["plain_over_first_plain"] == 1.0
    assert second["plain_over_first_plain"] is not None and second["plain_over_first_plain"] > 0
    assert first["auto_over_plain"] is not None and first["identical_at_t0"] == "2/2"
    assert second["batch_noise"] is not None and set(second["pass_cost"]) >= {"2", "4"}
    table = (out / "targets.md").read_text(encoding="utf-8")
    assert "| tiny-target.derived-q4_0 |" in table and "auto ÷ plain" in table


def test_unknown_or_missing_targets_are_user_errors(
    tiny_models: TinyModels, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["bench", "--out", str(tmp_path / "o"), "--prompts", str(write_prompts(tmp_path))]
    assert main([*base, "--targets", str(tmp_path / "nope.gguf")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main([*base, "--targets", "default:fast"]) == 2
    assert "must be one of target, cpu, optimised" in capsys.readouterr().err
    same = str(tiny_models.target)
    assert main([*base, "--targets", f"{same},{same}"]) == 2
    assert "named twice" in capsys.readouterr().err
    assert main([*base, "--targets", "default:no-head"]) == 2
    assert ":no-head goes after a GGUF file" in capsys.readouterr().err


def test_comparison_pairs_prompts_and_needs_a_target() -> None:
    def report(plain: float, auto: float) -> dict:
        rows = [
            {
                "prompt": p,
                "repeat": 0,
                "temperature": 0.0,
                "mode": m,
                "tok_s": v,
                "speedup": v / plain,
                "in_run_speedup": None,
                "identical_to_plain": True,
            }
            for p in ("a", "b")
            for m, v in (("plain", plain), ("auto", auto))
        ]
        return {"config": {"temperatures": [0.0]}, "info": {}, "results": rows}

    comparison = compare_targets([("slow", report(10.0, 12.0)), ("fast", report(12.0, 18.0))])
    slow, fast = comparison["rows"]
    assert slow["auto_over_plain"] == 1.2 and fast["auto_over_plain"] == 1.5
    assert fast["plain_over_first_plain"] == 1.2 and fast["auto_over_first_plain"] == 1.8
    assert "| fast |" in render_comparison(comparison)
    with pytest.raises(ValueError):
        compare_targets([])


def test_png_of_a_run_whose_auto_never_drafted(tmp_path: Path) -> None:
    # A CPU-fast target can make auto choose plain throughout: no acceptance line to label.
    from specchat.bench.reports.report import render_png

    rows = [
        {
            "prompt": "a",
            "temperature": 0.0,
            "mode": m,
            "k": None,
            "speedup": 1.0,
            "position_drafted": [],
            "position_accepted": [],
        }
        for m in ("plain", "auto")
    ]
    render_png({"results": rows}, tmp_path / "r.png")
    assert (tmp_path / "r.png").stat().st_size > 0


def test_a_target_beside_itself_without_its_head(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from specchat.tinyarch import write_tiny_qwen35

    target = write_tiny_qwen35(tmp_path / "qwen35-mtp.gguf", mtp=True)
    out = tmp_path / "out"
    argv = ["bench", "--targets", f"{target},{target}:no-head", "--modes", "plain,mtp,auto"]
    argv += ["--prompts", str(write_prompts(tmp_path)), "--temperature", "0"]
    argv += ["--max-tokens", "8", "--threads", "1", "--ctx", "512", "--no-floor"]
    assert main([*argv, "--out", str(out)]) in (0, 1)
    comparison = json.loads((out / "targets.json").read_text(encoding="utf-8"))
    assert comparison["targets"] == ["qwen35-mtp", "qwen35-mtp:no-head"]
    with_head, without = (
        json.loads((out / folder / "report.json").read_text(encoding="utf-8"))
        for folder in ("qwen35-mtp", "qwen35-mtp_no-head")
    )
    assert {r["mode"] for r in with_head["results"]} >= {"plain", "mtp", "auto"}
    assert "mtp" not in {r["mode"] for r in without["results"]}
    assert comparison["rows"][1]["plain_over_first_plain"] > 0
