"""`specchat bench` end to end on the tiny models, through specchat.cli.main."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specchat.cli import main
from specchat.tinymodels import TinyModels
from tests.helpers.tiny_bench import tiny_bench_argv


def test_bench_end_to_end(
    tiny_models: TinyModels, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = tiny_bench_argv(
        tiny_models,
        tmp_path,
        *("--modes", "plain,lookup,draft,auto", "--k", "3", "--temperature", "0,0.8"),
        *("--max-tokens", "12", "--out", str(out)),
    )
    # Exit status 1 means a speed goal failed, which tiny random models may well do.
    assert main(argv) in (0, 1)
    captured = capsys.readouterr()
    assert "best at α = 1" in captured.out and "report:" in captured.out
    assert "[" in captured.err  # progress lines (stderr is not a terminal here)
    data = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert {(r["prompt"], r["mode"]) for r in data["results"]} >= {
        ("edit", "plain"),
        ("edit", "lookup"),
        ("edit", "draft"),
        ("chat", "auto"),
    }
    assert (out / "report.md").exists() and (out / "report.png").exists()
    # The first answer after a fresh load, plain and auto (--repeat 1: one load each).
    first = data["first_answer"]
    assert [(a["mode"], a["repeat"]) for a in first["answers"]] == [("plain", 0), ("auto", 0)]
    assert all(a["stored_tables"] == 0 and a["measured_sizes"] == 0 for a in first["answers"])
    assert set(first["median_ttft_ms"]) == {"plain", "auto"} and first["auto_over_plain"] > 0
    assert any("first answer after a load" in g["name"] for g in data["goals"])
    assert "first answer after a load" in captured.out and "goal ≤ 1.10×" in captured.out
    assert "## First answer after a load" in (out / "report.md").read_text(encoding="utf-8")

    # rounds.jsonl carries each prompt's trace, so the run can be re-priced on other costs.
    rows = [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines()]
    traces = [row for row in rows if row["record"] == "trace"]
    assert {row["prompt"] for row in traces} == {"edit", "chat"}
    assert all(len(row["draft"]) == len(row["answer"]) for row in traces)
    capsys.readouterr()
    replay_out = tmp_path / "replay"
    argv = [
        "bench",
        "--replay",
        str(out / "rounds.jsonl"),
        "--costs",
        "gpu",
        "--out",
        str(replay_out),
    ]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "edit" in printed and "ceiling" in printed and "geometric mean" in printed
    report = json.loads((replay_out / "replay.json").read_text(encoding="utf-8"))
    assert {p["prompt"] for p in report["prompts"]} == {"edit", "chat"}
    assert main(["bench", "--replay", str(out / "rounds.jsonl")]) == 2
    assert "--costs" in capsys.readouterr().err


def test_the_first_answer_can_be_skipped(
    tiny_models: TinyModels, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = tiny_bench_argv(
        tiny_models,
        tmp_path,
        *("--modes", "plain,auto", "--temperature", "0", "--max-tokens", "4", "--repeat", "2"),
        *("--no-floor", "--no-physical", "--no-first-answer", "--out", str(out)),
    )
    assert main(argv) in (0, 1)
    captured = capsys.readouterr()
    assert "first answer" not in captured.out + captured.err
    data = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert data["first_answer"] is None and data["config"]["first_answer"] is False
    assert not any("first answer" in g["name"] for g in data["goals"])
    assert "first token, auto" in captured.out  # every run's own time to first token stays
    assert all(r["ttft_ms"] > 0 for r in data["results"])
    # Without the flag, --repeat 2 loads each mode twice.
    assert main([*argv[:-3], "--out", str(tmp_path / "with")]) in (0, 1)
    data = json.loads((tmp_path / "with" / "report.json").read_text(encoding="utf-8"))
    modes = [(a["mode"], a["repeat"]) for a in data["first_answer"]["answers"]]
    assert modes == [("plain", 0), ("auto", 0), ("auto", 1), ("plain", 1)]


def test_bad_prompt_file_is_a_user_error(
    tiny_models: TinyModels, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x"}\n', encoding="utf-8")
    argv = [
        "bench",
        "--target",
        str(tiny_models.target),
        "--prompts",
        str(bad),
        "--out",
        str(tmp_path / "o"),
    ]
    assert main(argv) == 2
    assert "bad.jsonl:1: 'user' must be a non-empty string" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--modes", "plain,fast", "unknown drafting mode"),
        ("--k", "0", "between 1 and 16"),
        ("--temperature", "hot", "bad temperature list"),
    ],
)
def test_bad_options_are_user_errors(
    tiny_models: TinyModels,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    option: str,
    value: str,
    message: str,
) -> None:
    argv = [
        "bench",
        "--target",
        str(tiny_models.target),
        option,
        value,
        "--out",
        str(tmp_path / "o"),
    ]
    assert main(argv) == 2
    assert message in capsys.readouterr().err
