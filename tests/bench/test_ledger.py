"""The loss ledger: auto's replayed time over the ceiling's, charged round by round to causes
that add up to the gap; each cause found where an answer is built to lose time that way."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from specchat.bench.hindsight.bounds import PLAIN_SOURCE, Oracle, oracle
from specchat.bench.hindsight.ledger import LABELS, Cause, Ledger, attribute
from specchat.bench.hindsight.replay import read_costs, read_traces, replay
from specchat.bench.live.trace import AnswerTrace, record_trace
from specchat.engine.costs.machine import MachineCosts
from specchat.engine.drafting.draft_model.draft_model_column import MODEL_SOURCE
from specchat.engine.types import PolicyChoice, RoundResult, Stats, TokenEvent, TokenKind
from tests.helpers.traces import linear_costs, with_model

ROUNDS = Path(__file__).parent / "data" / "default-pair-rounds.jsonl"

#: A prompt of 100 tokens, and an answer of 80 that shares none of them (nothing to copy).
PROMPT = tuple(range(1000, 1100))
FRESH = tuple(range(2000, 2080))


@pytest.fixture(scope="module")
def traces() -> list[AnswerTrace]:
    return read_traces(ROUNDS)


@pytest.mark.parametrize("table", ["gpu", "cpu", "xeon", "h200", "h200-qwen2.5", "h200-qwen3.5"])
def test_the_causes_add_up_to_the_gap_on_the_recorded_answers(
    traces: list[AnswerTrace], table: str
) -> None:
    results = replay(traces, read_costs(table))
    for r in results:
        ledger = r.ledger
        assert ledger.gap_ms == pytest.approx(r.auto_ms - r.ceiling_ms, abs=1e-6)
        assert sum(ledger.ms.values()) == pytest.approx(ledger.gap_ms, abs=1e-6)
        # A round's loss is split into parts that cannot be negative; only the one-off line
        # (the ceiling's own catch-up taken off) and the residue can be.
        for cause in set(Cause) - {Cause.ONE_OFF, Cause.OTHER}:
            assert ledger.ms[cause] >= -1e-9, (r.prompt, cause)
    whole = Ledger.total([r.ledger for r in results])
    assert whole.gap_ms > 0
    # The residue is a small part: the choices explain the gap, not the bookkeeping.
    assert abs(whole.ms[Cause.OTHER]) <= 0.1 * whole.gap_ms


def _replayed(trace: AnswerTrace, costs: MachineCosts) -> Ledger:
    [result] = replay([trace], costs)
    assert result.ledger.gap_ms > 0
    assert sum(result.ledger.ms.values()) == pytest.approx(result.ledger.gap_ms, abs=1e-6)
    return result.ledger


def test_plain_while_the_draft_model_would_have_kept_everything_is_plain_chosen() -> None:
    # The draft model writes the whole answer, but a drafted token costs half a pass, and
    # the target hesitates at every token (margin 0): what it writes predicts a draft model
    # kept half the time, so auto expects it not to pay and decodes plainly but for a probe,
    # while the ceiling drafts 16 at a time from the start.
    trace = with_model(record_trace("fresh", PROMPT, FRESH), [True] * len(FRESH), margin=0.0)
    ledger = _replayed(trace, linear_costs(10.0, 1.0, 5.0))
    assert ledger.dominant() == Cause.PLAIN
    share = ledger.share(Cause.PLAIN)
    assert share is not None and share > 0.5


def test_a_long_copy_taken_in_short_drafts_is_k_too_short() -> None:
    # The answer copies 100 tokens of its prompt; a pass of 64 rows costs little more than
    # one of 1, so the ceiling copies 63 at a time. Auto starts short, trusting the match
    # more as it goes on.
    answer = tuple(range(3000, 3010)) + PROMPT[50:]
    ledger = _replayed(record_trace("copy", PROMPT, answer), linear_costs(10.0, 0.05))
    assert ledger.dominant() == Cause.SHORT
    share = ledger.share(Cause.SHORT)
    assert share is not None and share > 0.9


def test_drafts_past_a_model_that_agrees_every_other_token_are_k_too_long() -> None:
    # Every draft keeps its first token and no more: the ceiling drafts one at a time,
    # auto's prior acceptance asks for more, and pays for rows it does not keep.
    agrees = [i % 2 == 0 for i in range(len(FRESH))]
    trace = with_model(record_trace("every-other", PROMPT, FRESH), agrees)
    ledger = _replayed(trace, linear_costs(10.0, 1.0, 1.0))
    assert ledger.dominant() == Cause.LONG
    share = ledger.share(Cause.LONG)
    assert share is not None and share > 0.5


def test_copies_that_go_wrong_where_the_draft_model_is_right_are_the_wrong_source() -> None:
    # The prompt holds every four tokens of the answer followed by two others: a copy has
    # a 4-token match and misses at once, while the draft model keeps everything; the target
    # hesitates at every token, so auto weighs the draft model at what that predicts (half
    # kept) until its own drafts show better.
    other = iter(range(5000, 9000))
    prompt = list(range(1000, 1010))
    for i in range(3, len(FRESH)):
        prompt += [*FRESH[i - 3 : i + 1], next(other), next(other)]
    agrees = [True] * len(FRESH)
    trace = with_model(record_trace("misleading", tuple(prompt), FRESH), agrees, margin=0.0)
    ledger = _replayed(trace, linear_costs(10.0, 0.2, 4.0))
    assert ledger.dominant() == Cause.SOURCE
    share = ledger.share(Cause.SOURCE)
    assert share is not None and share > 0.5


def test_a_probe_of_a_draft_model_that_never_agrees_is_charged_to_probing() -> None:
    # Nothing to copy and a draft model that is always wrong where the target hesitates at
    # every token: the ceiling decodes plainly, and all auto loses is the probes it makes
    # now and then to see whether drafting pays.
    trace = with_model(record_trace("hopeless", PROMPT, FRESH), [False] * len(FRESH), margin=0.0)
    ledger = _replayed(trace, linear_costs(10.0, 1.0, 5.0))
    assert ledger.ms[Cause.PROBE] == pytest.approx(ledger.gap_ms)


# --- rounds made by hand: the ceiling's own moves, then one thing changed --------------------
#: The drafters the hand-made rounds name for the ceiling's sources.
_MODES = {PLAIN_SOURCE: "plain", MODEL_SOURCE: "draft", "lookup": "lookup", "suffix": "suffix"}


def _following(trace: AnswerTrace, costs: MachineCosts, best: Oracle) -> list[RoundResult]:
    """Rounds that make the ceiling's move at every position they reach, at its prices."""
    rounds: list[RoundResult] = []
    i, start, token_ms = 0, len(trace.prompt_tokens), costs.draft_token_ms or 0.0
    while i < len(trace.answer):
        move = best.choice(i)
        kept = move.end - i - 1
        verify_ms = costs.target.target_ms(move.k + 1, start + i)
        assert verify_ms is not None
        events = [_event(TokenKind.ACCEPTED, len(rounds), n) for n in range(kept)]
        events.append(_event(TokenKind.PLAIN, len(rounds), kept))
        rounds.append(
            RoundResult(
                index=len(rounds),
                events=tuple(events),
                rejected=(),
                rejected_text="",
                drafted=move.k,
                accepted=kept,
                draft_ms=move.k * token_ms if move.source == MODEL_SOURCE else 0.0,
                verify_ms=verify_ms,
                choice=PolicyChoice(_MODES[move.source], move.k, "as the ceiling"),
                temperature=0.0,
                stats=Stats(),
                rows=move.k + 1,
            )
        )
        i = move.end
    return rounds


def _event(kind: TokenKind, round_index: int, position: int) -> TokenEvent:
    return TokenEvent(kind, 0, "", 1.0, None, round_index, position, 1.0)


@pytest.fixture
def drafted() -> tuple[AnswerTrace, MachineCosts, Oracle, list[RoundResult]]:
    """An answer the draft model writes in runs of five, and rounds that follow the ceiling
    (which drafts with it: nothing to copy, so it charges itself no catch-up)."""
    agrees = [i % 6 != 5 for i in range(len(FRESH))]
    trace = with_model(record_trace("runs", PROMPT, FRESH), agrees)
    costs = linear_costs(10.0, 1.0, 1.0, catchup_ms=0.5)
    best = oracle(trace, costs)
    rounds = _following(trace, costs, best)
    assert any(r.choice.mode == "draft" for r in rounds) and best.catchup_ms == 0.0
    return trace, costs, best, rounds


def test_rounds_that_follow_the_ceiling_lose_nothing(
    drafted: tuple[AnswerTrace, MachineCosts, Oracle, list[RoundResult]],
) -> None:
    trace, costs, best, rounds = drafted
    ledger = attribute(trace, costs, rounds, [0.0] * len(rounds), best)
    assert ledger.gap_ms == pytest.approx(0.0, abs=1e-9)
    assert all(ms == pytest.approx(0.0, abs=1e-9) for ms in ledger.ms.values())


def test_a_catch_up_is_a_one_off(
    drafted: tuple[AnswerTrace, MachineCosts, Oracle, list[RoundResult]],
) -> None:
    trace, costs, best, rounds = drafted
    n = next(n for n, r in enumerate(rounds) if r.choice.mode == "draft")
    rounds[n] = replace(rounds[n], draft_ms=rounds[n].draft_ms + 25.0)
    catchups = [25.0 if m == n else 0.0 for m in range(len(rounds))]
    ledger = attribute(trace, costs, rounds, catchups, best)
    assert ledger.gap_ms == pytest.approx(25.0)
    assert ledger.ms[Cause.ONE_OFF] == pytest.approx(25.0)
    assert ledger.dominant() == Cause.ONE_OFF


def test_a_tree_pass_wider_than_its_kept_path_is_charged_to_its_unused_rows(
    drafted: tuple[AnswerTrace, MachineCosts, Oracle, list[RoundResult]],
) -> None:
    # One round checks four more rows (a branch) beside the path it keeps.
    trace, costs, best, rounds = drafted
    n = next(n for n, r in enumerate(rounds) if r.drafted > 1)
    rows = rounds[n].rows + 4
    depth = len(trace.prompt_tokens) + sum(len(r.events) for r in rounds[:n])
    wider = costs.target.cost_ms(rows, depth)
    assert wider is not None
    extra = wider - rounds[n].verify_ms
    rounds[n] = replace(rounds[n], rows=rows, verify_ms=wider)
    ledger = attribute(trace, costs, rounds, [0.0] * len(rounds), best)
    assert ledger.gap_ms == pytest.approx(extra) and extra > 0
    assert ledger.ms[Cause.TREE] == pytest.approx(extra)


# --- where it is shown ---------------------------------------------------------------------
def test_the_replay_prints_the_ledger_and_writes_it_to_replay_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from specchat.cli import main

    assert main(["bench", "--replay", str(ROUNDS), "--costs", "gpu", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    ledger = printed[printed.index("loss ledger") :]
    for label in LABELS.values():
        assert label in ledger
    assert "gap (auto − ceiling)" in ledger and "edit-rename" in ledger
    report = json.loads((tmp_path / "replay.json").read_text(encoding="utf-8"))
    whole = report["ledger"]
    assert sum(c["ms"] for c in whole["causes"].values()) == pytest.approx(whole["gap_ms"], abs=0.1)
    for prompt in report["prompts"]:
        gap = prompt["auto_ms"] - prompt["ceiling_ms"]
        assert prompt["ledger"]["gap_ms"] == pytest.approx(gap, abs=0.02)


def test_the_bench_report_replays_its_answers_at_the_costs_it_measured(
    traces: list[AnswerTrace],
) -> None:
    from specchat.bench.live.physical import PhysicalCosts
    from specchat.bench.live.runner import BenchConfig, BenchOutcome
    from specchat.bench.reports.replay_report import render_replay, replay_section

    gpu = read_costs("gpu")
    measured = {n: gpu.target.pass_ms[n] for n in (1, 2, 4, 8, 16, 32, 64)}
    physical = PhysicalCosts(measured, gpu.draft_token_ms, 100, (0, 1.0), None)
    outcome = BenchOutcome(
        records=(),
        floors={},
        physical=physical,
        config=BenchConfig(),
        info={"backend": "CUDA"},
        traces={t.prompt: t for t in traces[:2]},
    )
    section = replay_section(outcome)
    assert section is not None
    assert [p["prompt"] for p in section["prompts"]] == [t.prompt for t in traces[:2]]
    # Every size is priced from the start (between measured ones, on the line joining
    # them): no round reprices the table mid-answer, so the choices explain the gap.
    whole = section["ledger"]
    assert abs(whole["causes"]["other"]["ms"]) <= 0.1 * whole["gap_ms"]
    markdown = "\n".join(render_replay(section))
    assert "loss ledger" in markdown and LABELS[Cause.SHORT] in markdown
    assert (
        replay_section(BenchOutcome((), {}, None, BenchConfig(), {}, traces=outcome.traces)) is None
    )
