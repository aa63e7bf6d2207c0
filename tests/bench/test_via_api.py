"""`specchat bench --via-api` on the tiny pair: each prompt direct and through the API, the
same answer both ways, and a report with the overhead ratio."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specchat.bench.api.via_api import compare_via_api
from specchat.bench.prompts import BenchPrompt
from specchat.cli import main
from specchat.engine.session import ChatEngine
from specchat.tinymodels import TinyModels
from tests.helpers.tiny_bench import tiny_bench_argv


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
    options = ("--via-api", "--max-tokens", "24", "--out", str(out))
    code = main(tiny_bench_argv(tiny_models, tmp_path, *options, prompts=prompts))
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


def test_both_ways_start_alike_neither_reading_the_prompt_nor_copying_the_other(
    tiny_models: TinyModels,
) -> None:
    # The same chat three times (with and without a prediction), then another: whichever
    # way answers first must not leave the other a read prompt or an answer to copy.
    user = "Rename total to subtotal in this file:\n" + "total = total + price\n" * 6
    prompts = [
        BenchPrompt("first", user, system="You edit code."),
        BenchPrompt("again", user, system="You edit code.", prediction=user),
        BenchPrompt("third", user, system="You edit code."),
        BenchPrompt("other", "Write a poem about the sea. " * 4),
    ]
    engine = ChatEngine.load(tiny_models.target, tiny_models.draft_close, n_ctx=1024, n_threads=1)
    try:
        results = compare_via_api(engine, prompts, mode="suffix", max_tokens=24)
    finally:
        engine.close()
    assert [r.prompt for r in results] == ["first", "again", "third", "other"]
    for r in results:
        assert r.same_text, r.prompt
        # Prompt tokens evaluated by each way: only the last, read with the first round (both
        # found the rest read).
        assert r.direct_work[0] == r.api_work[0] == 1, r
        # The same drafting state, so the same rounds at T = 0 (copying the other way's
        # answer from the suffix index would take far fewer).
        assert r.direct_work[1] == r.api_work[1], r
        assert r.direct_work[1] > 0
