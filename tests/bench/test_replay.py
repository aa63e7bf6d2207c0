"""Replay: auto and the ceiling on recorded answers, priced under other machines' cost tables.

The traces are the default pair's plain temperature-0 answers to six of the shipped bench
prompts (64 tokens each), recorded by tools/record_replay_traces.py in `specchat bench`'s
rounds.jsonl form (tests/bench/data/default-pair-rounds.jsonl): at temperature 0 the answer
and every drafter's proposals are the same on any machine, so only the costs change between
replays.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specchat.bench.hindsight.bounds import ceiling_ms
from specchat.bench.hindsight.replay import (
    ReplayError,
    read_costs,
    read_traces,
    replay,
)
from specchat.bench.live.trace import AnswerTrace
from specchat.engine.costs.machine import MachineCosts
from specchat.engine.costs.table import CostTable

ROUNDS = Path(__file__).parent / "data" / "default-pair-rounds.jsonl"


@pytest.fixture(scope="module")
def traces() -> list[AnswerTrace]:
    return read_traces(ROUNDS)


def test_the_recorded_traces_are_whole(traces: list[AnswerTrace]) -> None:
    assert len(traces) == 6
    for trace in traces:
        assert trace.draft is not None and len(trace.answer) >= 32
        assert any(trace.draft_kept(i) > 2 for i in range(len(trace.answer)))
        if trace.prompt.startswith("edit"):  # an edit copies its input: lookup keeps runs
            assert any(trace.lookup_kept(i) > 4 for i in range(len(trace.answer)))


def test_under_a_gpu_table_auto_drafts_with_the_model_and_nears_the_best_setting(
    traces: list[AnswerTrace],
) -> None:
    results = replay(traces, read_costs("gpu"))
    for r in results:
        # Nothing beats choosing every round knowing the answer, nor the best fixed setting
        # (one of the rounds' sequences the ceiling considers).
        assert r.ceiling_ms <= r.fixed_ms * 1.0001 and r.ceiling_ms <= r.auto_ms * 1.0001
        # A short answer can lose a few guesses (34 tokens of haiku), never more.
        assert r.speedup > 0.95
    assert sum(r.plain_ms for r in results) / sum(r.auto_ms for r in results) > 1.5
    drafted = sum(r.kept.get("draft", 0) for r in results)
    looked_up = sum(r.kept.get("lookup", 0) for r in results)
    assert drafted > looked_up
    assert sum(r.main_drafter == "draft" for r in results) >= len(results) // 2
    # Auto must guess each round; the best single mode and K, picked knowing each answer,
    # is what tuning by hand would reach at best. Auto, learning the draft model's
    # acceptance from every token and sizing its drafts by its confidence, beats it overall.
    total_auto = sum(r.auto_ms for r in results)
    total_fixed = sum(r.fixed_ms for r in results)
    assert total_fixed / total_auto >= 1.0
    # The ceiling knows how many tokens every round will keep; a policy that must guess
    # reaches about three quarters of its speed here (no fixed setting gets past 0.74).
    total_ceiling = sum(r.ceiling_ms for r in results)
    assert total_ceiling / total_auto >= 0.7


def test_under_this_cpus_table_auto_copies_or_decodes_plainly(traces: list[AnswerTrace]) -> None:
    results = replay(traces, read_costs("cpu"))
    for r in results:
        assert r.ceiling_ms <= r.auto_ms * 1.0001
        assert set(r.rounds) <= {"plain", "lookup", "suffix"}, r.rounds
    assert any(r.rounds.get("suffix", 0) for r in results)


def test_the_ceiling_is_plain_when_nothing_is_kept() -> None:
    trace = AnswerTrace(
        "x",
        (1, 2, 3),
        (4, 5, 6, 7),
        lookup=((9,),) * 4,
        lookup_len=(1,) * 4,
        match_len=(1,) * 4,
        draft=((9,),) * 4,
    )
    costs = MachineCosts(
        CostTable(sizes=(1, 2), pass_ms={1: 10.0, 2: 11.0}),
        CostTable(sizes=(1,), pass_ms={1: 1.0}),
    )
    assert ceiling_ms(trace, costs) == pytest.approx(40.0)
    [result] = replay([trace], costs)
    assert result.speedup <= 1.0


def test_unusable_files_are_clear_errors(tmp_path: Path) -> None:
    empty = tmp_path / "rounds.jsonl"
    empty.write_text(json.dumps({"record": "round", "mode": "plain"}) + "\n")
    with pytest.raises(ReplayError, match="no answer traces"):
        read_traces(empty)
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"record": "trace", "prompt": "x"}\n')
    with pytest.raises(ReplayError, match="line 1"):
        read_traces(broken)
    with pytest.raises(ReplayError, match="cannot read"):
        read_costs(str(tmp_path / "none.json"))


def test_a_rename_is_copied_through_its_later_occurrences(
    traces: list[AnswerTrace], monkeypatch: pytest.MonkeyPatch
) -> None:
    # edit-rename renames `x` to `per_customer`: the answer's first occurrence teaches the
    # rename, and the copy goes on through the next one instead of breaking there.
    from specchat.engine.drafting.copies.substitutions import Substitutions

    [trace] = [t for t in traces if t.prompt == "edit-rename"]
    carried = replay([trace], read_costs("cpu"))[0]
    monkeypatch.setattr(Substitutions, "copy", lambda self, text, k: None)
    broken = replay([trace], read_costs("cpu"))[0]
    assert carried.auto_ms < 0.9 * broken.auto_ms
    assert sum(carried.rounds.values()) < sum(broken.rounds.values())


def test_passes_deeper_in_the_text_are_priced_dearer_and_auto_checks_fewer_rows_there(
    traces: list[AnswerTrace],
) -> None:
    flat, deep = read_costs("cpu"), read_costs("cpu")
    # ms a row per 1,000 cached tokens: steep, so that the attention of the rows a draft adds
    # outweighs the chance differences between two replays of these few short answers.
    slope = 20.0
    flat.target.slope_ms, deep.target.slope_ms = 0.0, slope
    base = deep.target.context_tokens
    one = flat.target.cost_ms(1)
    assert one is not None
    rows = lambda r: sum(n * c for n, c in r.sizes.items() if n > 1)  # noqa: E731
    rows_flat = rows_deep = 0
    for before, after in zip(replay(traces, flat), replay(traces, deep), strict=True):
        trace = next(t for t in traces if t.prompt == before.prompt)
        start = len(trace.prompt_tokens)
        # Plain pays one token's attention over the cache beyond the table's depth.
        growth = sum(slope * max(0, start + i - base) / 1000 for i in range(before.tokens))
        assert after.plain_ms == pytest.approx(before.plain_ms + growth)
        assert after.ceiling_ms <= after.auto_ms * 1.0001
        rows_flat, rows_deep = rows_flat + rows(before), rows_deep + rows(after)
    # Each extra row costs its attention over the cache too: auto checks fewer of them.
    assert rows_deep < rows_flat
    assert MachineCosts.from_json(deep.to_json()).target.slope_ms == slope
