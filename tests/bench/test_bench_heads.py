"""The bench runs the draft heads a pair offers beside plain: a tiny Qwen3.5-style hybrid
with its MTP head, through run_bench and through `specchat bench`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from specchat.bench.live.runner import HEADS, BenchConfig, BenchOutcome, for_pair, run_bench
from specchat.bench.prompts import BenchPrompt
from specchat.bench.reports.compare import compare
from specchat.bench.reports.report import write_report
from specchat.cli import main
from specchat.engine.drafting import AUTO, PLAIN
from specchat.engine.session import ChatEngine
from specchat.tinyarch import write_tiny_qwen35
from tests.helpers.bench_prompts import write_prompts

PROMPTS = (
    BenchPrompt("copy", "abc abc abc abc the cat the cat the cat", category="code-editing"),
    BenchPrompt("free", "hello there", category="creative"),
)


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_qwen35(tmp_path_factory.mktemp("hybrid") / "qwen35-mtp.gguf", mtp=True)


@pytest.fixture(scope="module")
def engine(hybrid: Path) -> Iterator[ChatEngine]:
    engine = ChatEngine.load(hybrid, n_ctx=512, n_threads=1)
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def outcome(engine: ChatEngine) -> BenchOutcome:
    # The default modes, at one K and one temperature to keep it short.
    config = BenchConfig(ks=(3,), temperatures=(0.0,), max_tokens=12, floor=False)
    return run_bench(engine, PROMPTS, config)


@pytest.fixture(scope="module")
def report(outcome: BenchOutcome, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("bench-heads")
    return write_report(outcome, out, png=False), out


def test_the_default_modes_run_the_pairs_heads_and_drop_what_it_cannot_serve(
    outcome: BenchOutcome,
) -> None:
    # No draft model: no "draft"; the MTP head in place of "heads".
    assert outcome.config.modes == (PLAIN, "lookup", "mtp", AUTO)


def test_the_mtp_head_runs_beside_plain_and_is_reported(
    outcome: BenchOutcome, report: tuple[dict, Path]
) -> None:
    rows = [r for r in compare(outcome) if r["mode"] == "mtp"]
    assert {(r["prompt"], r["k"]) for r in rows} == {(p.id, 3) for p in PROMPTS}
    for row in rows:
        assert row["drafted"] > 0 and row["speedup"] is not None
        assert row["identical_to_plain"] or row["divergence_near_tie"], row
        assert set(row["choices"]) <= {"mtp", PLAIN}

    data, out = report
    assert data["physical"]["head_token_ms"]["mtp"] > 0
    md = (out / "report.md").read_text(encoding="utf-8")
    pivot = md.split("## Speed-up over plain, T = 0")[1].splitlines()
    header = next(line for line in pivot if line.startswith("| prompt |"))
    assert "| plain | lookup K=3 | mtp K=3 | auto |" in header  # side by side
    assert "Draft head `mtp`:" in md
    assert "| kept |" in md.split("## Every run")[1]


def test_the_traces_hold_the_heads_drafts_and_the_replay_prices_them(
    outcome: BenchOutcome, report: tuple[dict, Path]
) -> None:
    for trace in outcome.traces.values():
        assert set(trace.heads) == {"mtp"}
        assert len(trace.heads["mtp"]) == len(trace.answer)
        assert all(trace.heads["mtp"][i] for i in range(len(trace.answer)))
    data, out = report
    rows = [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines()]
    assert all("mtp" in row["heads"] for row in rows if row["record"] == "trace")
    # Replayed at this run's measured costs, the head's among the drafters auto may use.
    replayed = data["replay"]["prompts"]
    assert {p["prompt"] for p in replayed} == {p.id for p in PROMPTS}
    assert data["replay"]["costs"] == "measured in this run (physical)"


def test_the_bench_measures_the_heads_table(engine: ChatEngine) -> None:
    # run_bench ran the profiler: the head's drafted token is priced from its own table.
    assert engine.costs.head_token_ms("mtp") is not None
    assert engine.decoder.drafters["mtp"].table is engine.costs.heads["mtp"]  # type: ignore[attr-defined]


class _Offered:
    def __init__(self, *names: str) -> None:
        self._names = names

    def names(self) -> tuple[str, ...]:
        return self._names

    def __contains__(self, name: object) -> bool:
        return name in self._names


def test_heads_stand_for_the_pairs_heads_and_unserved_modes_are_left_out() -> None:
    config = BenchConfig(modes=(PLAIN, "lookup", "draft", HEADS, AUTO), sampled_modes=(HEADS,))
    resolved = for_pair(config, _Offered("lookup", "suffix", "mtp"))  # type: ignore[arg-type]
    assert resolved.modes == (PLAIN, "lookup", "mtp", AUTO)
    assert resolved.sampled_modes == ("mtp",)
    asked = BenchConfig(modes=(PLAIN, "assistant"))
    assert for_pair(asked, _Offered("lookup", "mtp")).modes == (PLAIN,)  # type: ignore[arg-type]


def test_specchat_bench_runs_a_head_by_name(
    hybrid: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = [
        *("bench", "--target", str(hybrid), "--prompts", str(write_prompts(tmp_path))),
        *("--modes", "plain,mtp,assistant", "--k", "2", "--temperature", "0"),
        *("--max-tokens", "8", "--threads", "1", "--ctx", "512", "--out", str(out)),
        *("--no-floor", "--no-physical", "--no-first-answer"),
    ]
    assert main(argv) in (0, 1)  # 1: a speed goal failed, as tiny random models may
    err = capsys.readouterr().err
    assert "the pair offers no assistant; skipped" in err
    data = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert {r["mode"] for r in data["results"]} == {PLAIN, "mtp"}
    assert data["config"]["modes"] == [PLAIN, "mtp"]
