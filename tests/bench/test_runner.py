"""The bench on the tiny models: every report file, the required fields, plain as reference."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specchat.bench.live.physical import BATCH_SIZES, best_speedups, cpp_floor
from specchat.bench.live.runner import FLOOR, BenchConfig, plan_runs, run_bench
from specchat.bench.prompts import BenchPrompt
from specchat.bench.reports.compare import compare, divergence
from specchat.bench.reports.report import write_report
from specchat.engine.drafting import mode_names
from specchat.engine.llamacpp.backend import compute_backends
from specchat.engine.session import ChatEngine
from specchat.tinymodels import TinyModels

PROMPTS = (
    BenchPrompt("copy", "abc abc abc abc the cat the cat the cat", category="code-editing"),
    BenchPrompt("free", "hello there", system="be brief", category="creative"),
)

CONFIG = BenchConfig(
    modes=mode_names(),
    ks=(2, 4),
    temperatures=(0.0, 0.8),
    sampled_modes=("plain", "auto", "draft"),
    max_tokens=16,
)

REQUIRED = {
    "prompt",
    "mode",
    "k",
    "temperature",
    "tokens",
    "tok_s",
    "alpha",
    "tau",
    "draft_ms",
    "verify_ms",
    "speedup",
    "category",
    "position_drafted",
    "position_accepted",
}


@pytest.fixture(scope="module")
def engine(tiny_models: TinyModels):
    engine = ChatEngine.load(tiny_models.target, tiny_models.draft_close, n_ctx=512, n_threads=1)
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def report(engine: ChatEngine, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("bench")
    seen = []
    outcome = run_bench(engine, PROMPTS, CONFIG, progress=seen.append)
    assert seen[-1].done == seen[-1].total
    return write_report(outcome, out), out


def test_plan_alternates_and_always_includes_plain() -> None:
    config = BenchConfig(modes=("lookup",), ks=(3,), temperatures=(0.0, 0.5))
    plan = plan_runs(PROMPTS, config, has_draft=False)
    greedy = [v.label for _, p, t, v, _ in plan if p.id == "copy" and t == 0]
    assert sorted(greedy) == sorted(["plain", FLOOR, "lookup K=3"])
    # Sampled runs: plain and the sampled modes only (lookup is not one by default).
    assert {v.label for _, _, t, v, _ in plan if t == 0.5} == {"plain"}
    # The order rotates from one prompt to the next, so no mode always runs first.
    firsts = [v.label for _, p, t, v, _ in plan if t == 0 and p.id == "free"]
    assert firsts[0] != greedy[0]


def test_files_written(report: tuple[dict, Path]) -> None:
    _, out = report
    for name in ("report.json", "report.md", "report.png", "rounds.jsonl"):
        assert (out / name).stat().st_size > 0
    assert (out / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "## Goals" in md and "geomean" in md and "C++ floor" in md
    assert "lookup ceiling" in md
    # Which CPU kernels ran: the portable bundle's bench is compared with the native build's.
    assert f"({compute_backends().describe()})" in md


def test_each_prompt_gets_a_lookup_ceiling(report: tuple[dict, Path]) -> None:
    data = report[0]
    assert set(data["lookup_ceiling"]) == {p.id for p in PROMPTS}
    assert all(v >= 1.0 for v in data["lookup_ceiling"].values())
    edits = next(g for g in data["goals"] if "code-editing" in g["name"])
    assert "lookup ceiling" in edits["detail"]


def test_the_report_replays_each_answer_with_the_loss_ledger(report: tuple[dict, Path]) -> None:
    data, out = report
    replayed = data["replay"]
    assert {p["prompt"] for p in replayed["prompts"]} == {p.id for p in PROMPTS}
    for prompt in replayed["prompts"]:
        ledger = prompt["ledger"]
        assert sum(c["ms"] for c in ledger["causes"].values()) == pytest.approx(
            ledger["gap_ms"], abs=0.05
        )
    assert "loss ledger" in (out / "report.md").read_text(encoding="utf-8")


def test_results_carry_the_required_fields(report: tuple[dict, Path]) -> None:
    data = json.loads((report[1] / "report.json").read_text(encoding="utf-8"))
    results = data["results"]
    modes = {(r["mode"], r["k"], r["temperature"]) for r in results}
    for mode in ("lookup", "draft", "chain"):
        assert {(mode, 2, 0.0), (mode, 4, 0.0)} <= modes
    assert ("auto", None, 0.8) in modes and ("draft", 4, 0.8) in modes
    assert ("lookup", 2, 0.8) not in modes  # not a sampled mode here
    for row in results:
        assert row.keys() >= REQUIRED
        if row["temperature"] == 0:
            assert {
                "identical_to_plain",
                "divergence",
                "divergence_near_tie",
                "divergence_within_noise",
            } <= row.keys()
    assert data["physical"]["best_lookup"]["speedup"] > 0
    assert set(data["physical"]["logit_noise"]) == {str(n) for n in BATCH_SIZES}
    assert data["physical"]["logit_noise"]["1"] == 0.0  # a row against itself
    assert {g["result"] for g in data["goals"]} <= {"PASS", "FAIL", "n/a"}
    assert len(data["goals"]) >= 4


def test_plain_is_the_reference(report: tuple[dict, Path]) -> None:
    results = report[0]["results"]
    plain = [r for r in results if r["mode"] == "plain"]
    assert len(plain) == len(PROMPTS) * 2
    assert all(r["speedup"] == 1.0 for r in plain)
    assert all(r["identical_to_plain"] for r in plain if r["temperature"] == 0)


def test_greedy_modes_match_plain(report: tuple[dict, Path]) -> None:
    greedy = [r for r in report[0]["results"] if r["temperature"] == 0]
    assert greedy and all(r["identical_to_plain"] for r in greedy)
    assert all(r["divergence"] is None for r in greedy)
    drafted = [r for r in greedy if r["mode"] in ("draft", "chain")]
    assert all(r["drafted"] > 0 and r["position_drafted"] for r in drafted)


def test_floor_matches_plain_tokens(report: tuple[dict, Path]) -> None:
    floor = report[0]["floor"]
    assert {f["prompt"] for f in floor} == {p.id for p in PROMPTS}
    assert all(f["identical_to_plain"] and f["plain_over_floor"] > 0 for f in floor)


def test_floor_leaves_the_cache_consistent(engine: ChatEngine) -> None:
    tokens = engine.tokenize_prompt("the cat the cat")
    run = cpp_floor(engine.target, tokens, max_tokens=5)
    assert len(run.tokens) <= 5
    assert engine.target.tokens == tokens[:-1]
    # Decoding on top proves llama.cpp's cache agrees with the wrapper's bookkeeping.
    again = cpp_floor(engine.target, tokens, max_tokens=5)
    assert again.tokens == run.tokens


def test_speedup_ceilings() -> None:
    lookup, draft = best_speedups({1: 10.0, 2: 10.0, 4: 20.0}, 5.0)
    assert lookup == (1, 2.0)  # K = 1 costs what one token costs: 2 tokens per pass
    assert draft is not None and draft[0] == 1 and draft[1] == pytest.approx(2 / 1.5)
    assert best_speedups({1: 10.0, 2: 15.0}, None)[1] is None


def test_divergence_positions() -> None:
    assert divergence([1, 2, 3], [1, 2, 3]) is None
    assert divergence([1, 2, 3], [1, 5, 3]) == 1
    assert divergence([1, 2, 3], [1, 2]) == 2


def test_compare_marks_near_ties(engine: ChatEngine) -> None:
    from specchat.bench.live.records import RunRecord, Variant
    from specchat.bench.live.runner import BenchOutcome

    def record(mode: str, tokens: tuple[int, ...], margins: tuple[float, ...]) -> RunRecord:
        return RunRecord("p", "c", Variant(mode, None), 0.0, 0, tokens, margins, "", 1.0)

    outcome = BenchOutcome(
        (
            record("plain", (1, 2, 3), (1.0, 0.05, 2.0)),
            record("auto", (1, 4, 3), (1.0, 0.05, 2.0)),
            record("lookup", (9, 2, 3), (1.0, 0.05, 2.0)),
        ),
        {},
        None,
        CONFIG,
        {},
    )
    rows = {r["mode"]: r for r in compare(outcome)}
    assert rows["auto"]["divergence"] == 1 and rows["auto"]["divergence_near_tie"] is True
    assert rows["lookup"]["divergence"] == 0 and rows["lookup"]["divergence_near_tie"] is False
    assert rows["plain"]["speedup"] == 1.0


def test_a_shortfall_without_drafting_is_labelled_as_noise() -> None:
    from specchat.bench.reports.report import check_goals

    def row(prompt: str, mode: str, speedup: float, drafted: int) -> dict:
        return {
            "prompt": prompt,
            "category": "creative",
            "mode": mode,
            "k": None,
            "temperature": 0.8,
            "speedup": speedup,
            "drafted": drafted,
        }

    results = [
        row("quiet", "plain", 1.0, 0),
        row("quiet", "auto", 0.93, 0),
        row("busy", "plain", 1.0, 0),
        row("busy", "auto", 0.95, 12),
        row("fine", "plain", 1.0, 0),
        row("fine", "auto", 1.2, 30),
    ]
    goal = next(g for g in check_goals(results, []) if "T = 0.8" in g.name)
    assert goal.passed is False
    assert "quiet 0.930× (drafted nothing: plain's own work, so run-to-run noise)" in goal.detail
    assert "busy 0.950×" in goal.detail and "busy 0.950× (" not in goal.detail
    assert "fine" not in goal.detail.split("below:")[1]


def test_in_run_speedup_prices_rounds_at_the_runs_own_plain_rounds() -> None:
    from specchat.bench.live.records import RoundLog, RunRecord, Variant
    from specchat.bench.reports.compare import in_run_speedup

    def log(drafted: int, accepted: int, wall_ms: float) -> RoundLog:
        return RoundLog(
            "lookup" if drafted else "plain", drafted, drafted, accepted, 0.0, wall_ms, wall_ms, ""
        )

    def record(*logs: RoundLog) -> RunRecord:
        return RunRecord("p", "c", Variant("auto", None), 0.0, 0, (), (), "", 1.0, round_logs=logs)

    # Plain rounds at 40 ms; one round drafting 8 keeps 7 (8 tokens) in 160 ms: the run's
    # 12 tokens took 320 ms where plain rounds would have taken 480.
    assert in_run_speedup(
        record(log(0, 0, 40), log(0, 0, 40), log(8, 7, 160), log(0, 0, 40), log(0, 0, 40))
    ) == pytest.approx(480 / 320)
    assert in_run_speedup(record(log(0, 0, 30), log(0, 0, 50))) == pytest.approx(1.0)
    assert in_run_speedup(record(log(4, 4, 100))) is None  # nothing to price against


SESSION = BenchPrompt(
    "session",
    "abc abc the cat",
    category="code-editing",
    turns=("abc abc the cat", "now the dog", None),
    history=(({"role": "user", "content": "abc"}, {"role": "assistant", "content": "the cat"}),),
)


def test_a_session_runs_turn_by_turn_after_plains_answers(engine: ChatEngine) -> None:
    config = BenchConfig(
        modes=("plain", "lookup", "auto"),
        ks=(3,),
        temperatures=(0.0,),
        max_tokens=12,
        floor=False,
        physical=False,
    )
    plan = plan_runs([SESSION], config, has_draft=True)
    assert [turn for *_, turn in plan] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    outcome = run_bench(engine, [SESSION], config)
    rows = compare(outcome)
    assert sorted({(r["turn"], r["mode"]) for r in rows}) == [
        (t, m) for t in range(3) for m in ("auto", "lookup", "plain")
    ]
    for row in rows:
        assert row["identical_to_plain"] or row["divergence_near_tie"], row
    plain = {r["turn"]: r for r in rows if r["mode"] == "plain"}
    assert all(plain[t]["speedup"] == 1.0 for t in range(3))
    # A follow-up evaluates only what is new; a regenerate only its last token.
    assert plain[0]["prompt_evaluated"] == plain[0]["prompt_tokens"]
    assert plain[1]["prompt_evaluated"] <= plain[1]["prompt_tokens"] - plain[0]["prompt_tokens"]
    assert plain[2]["prompt_evaluated"] == 1
    assert {r["prompt_evaluated"] for r in rows if r["turn"] == 1} == {plain[1]["prompt_evaluated"]}
    # Every turn's plain answer is traced against its own prompt (replay and ceilings).
    assert set(outcome.traces) == {"session", "session#1", "session#2"}
    for turn, name in enumerate(("session", "session#1", "session#2")):
        assert len(outcome.traces[name].prompt_tokens) == plain[turn]["prompt_tokens"]
        assert list(outcome.traces[name].answer) == next(
            list(r.tokens) for r in outcome.records if r.turn == turn and r.variant.mode == "plain"
        )


def test_the_report_gives_sessions_per_turn() -> None:
    from specchat.bench.reports.session_report import render_sessions, session_goals, session_rows

    def row(turn: int, mode: str, speedup: float, kept: dict[str, int]) -> dict:
        return {
            "prompt": "s",
            "category": "session-edit",
            "turn": turn,
            "mode": mode,
            "k": None,
            "temperature": 0.0,
            "repeat": 0,
            "speedup": speedup,
            "in_run_speedup": None,
            "tok_s": 10.0 * speedup,
            "alpha": 0.5,
            "kept_by_source": kept,
            "prompt_tokens": 40 + 30 * turn,
            "prompt_evaluated": 40 if turn == 0 else 12,
            "drafted": 5,
        }

    results = [
        row(0, "plain", 1.0, {}),
        row(0, "auto", 1.1, {"lookup": 3}),
        row(1, "plain", 1.0, {}),
        row(1, "auto", 2.5, {"this chat": 40, "lookup": 2}),
        row(2, "plain", 1.0, {}),
        row(2, "auto", 1.5, {"an earlier chat": 9}),
    ]
    rows = session_rows(results)
    assert [(r["turn"], r["mode"]) for r in rows] == [
        (0, "plain"),
        (0, "auto"),
        (1, "plain"),
        (1, "auto"),
        (2, "plain"),
        (2, "auto"),
    ]
    assert rows[3]["kept_by_source"] == {"lookup": 2, "this chat": 40}
    [edit, regenerate, new_chat] = session_goals(rows)
    # Follow-up turns 1 and 2: 2.5× passes, 1.5× does not.
    assert edit[1] is False and "s#1 2.500×" in edit[2] and "s#2 1.500×" in edit[2]
    assert regenerate[1] is None and new_chat[1] is None
    [edit, *_] = session_goals(rows, {"s#1": 1.8, "s": 3.0})
    assert "s#1 2.500× (lookup ceiling 1.80×)" in edit[2]
    assert "s#2 1.500×" in edit[2] and "s#2 1.500× (" not in edit[2]  # none known for s#2
    md = "\n".join(render_sessions(rows))
    assert "| s | 1 | 0 | auto | 2.50× |" in md and "this chat 40" in md and "12 / 70" in md


def test_the_index_cost_is_measured_and_reported(report: tuple[dict, Path]) -> None:
    data, out = report
    cost = data["info"]["index_cost"]
    assert cost["stored_messages"] == 1000 and cost["stored_tokens"] > 0
    assert cost["build_s"] > 0 and cost["per_token_ms"] > 0 and cost["memory_mb"] > 0
    assert "## Suffix index cost" in (out / "report.md").read_text(encoding="utf-8")


def test_every_run_times_its_first_token(report: tuple[dict, Path]) -> None:
    data, out = report
    results = data["results"]
    for row in results:
        # From the request to the first token: the prompt stage is inside it, the whole
        # answer around it.
        assert 0 < row["ttft_ms"] <= row["total_ms"], row
        assert row["ttft_ms"] >= row["prompt_ms"], row
        assert row["ttft_over_plain"] is not None
    assert all(r["ttft_over_plain"] == 1.0 for r in results if r["mode"] == "plain")
    modes = {(r["mode"], r["temperature"]) for r in data["ttft"]}
    assert modes == {
        (r["mode"] if r["k"] is None else f"{r['mode']} K={r['k']}", r["temperature"])
        for r in results
    }
    for row in data["ttft"]:
        assert row["median_ttft_ms"] > 0 and row["ttft_over_plain"] > 0
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "## Time to first token" in md and "| auto | 0 |" in md
    # The bench's own pair: no fresh loads here (the command times the first answer).
    assert data["first_answer"] is None


def test_ttft_ratios_pair_each_run_with_plains() -> None:
    from specchat.bench.live.records import RunRecord, Variant
    from specchat.bench.live.runner import BenchOutcome
    from specchat.bench.reports.ttft_report import ttft_rows

    def record(prompt: str, mode: str, ttft_ms: float) -> RunRecord:
        return RunRecord(
            prompt,
            "c",
            Variant(mode, None),
            0.0,
            0,
            (1,),
            (1.0,),
            "",
            1.0,
            ttft_ms=ttft_ms,
            total_ms=2 * ttft_ms,
        )

    outcome = BenchOutcome(
        (
            record("a", "plain", 100.0),
            record("a", "auto", 200.0),
            record("b", "plain", 10.0),
            record("b", "auto", 5.0),
        ),
        {},
        None,
        CONFIG,
        {},
    )
    rows = {r["mode"]: r for r in ttft_rows(compare(outcome))}
    # 2× and 0.5× paired per prompt: 1× (the medians alone would say 1.87×).
    assert rows["auto"]["ttft_over_plain"] == pytest.approx(1.0)
    assert rows["auto"]["median_ttft_ms"] == pytest.approx(102.5)
    assert rows["plain"]["ttft_over_plain"] == 1.0
