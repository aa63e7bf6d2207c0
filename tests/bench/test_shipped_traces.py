"""The recorded answers shipped with the bench: one per single-turn prompt of each set, whole,
so that `specchat bench --replay` can price every set on any machine."""

from __future__ import annotations

from pathlib import Path

import pytest

import specchat.bench
from specchat.bench.hindsight.replay import read_traces
from specchat.bench.prompts import load_prompts, prompt_file

TRACES = Path(specchat.bench.__file__).parent / "traces"


@pytest.mark.parametrize("name", ["shipped", "everyday", "held-out"])
def test_each_set_has_a_whole_trace_per_single_turn_prompt(name: str) -> None:
    traces = read_traces(TRACES / f"{name}.jsonl")
    prompts = [p.id for p in load_prompts(prompt_file(name)) if p.turn_count == 1]
    assert [t.prompt for t in traces] == prompts
    for trace in traces:
        assert trace.answer and trace.draft is not None and trace.margins is not None
        assert trace.draft_past_miss is not None  # how far a draft goes on past its miss
        assert len(trace.answer) <= 128


@pytest.mark.parametrize("name", ["shipped", "everyday", "held-out"])
def test_where_nothing_pays_auto_keeps_within_two_percent_of_plain_on_every_answer(
    name: str,
) -> None:
    """A pass of n rows at n one-token passes: no draft can beat plain, and auto's guesses
    (probes, hopeful drafts) may cost it at most 2 % on any answer."""
    from specchat.bench.hindsight.replay import read_costs, replay

    costs = read_costs("nothing-pays")
    assert costs.target_ms(16) == pytest.approx(16 * costs.target_ms(1))
    for result in replay(read_traces(TRACES / f"{name}.jsonl"), costs):
        assert result.ceiling == pytest.approx(1.0)
        assert result.speedup >= 0.98, result.prompt


@pytest.mark.parametrize("name", ["shipped", "everyday", "held-out"])
def test_on_a_gpu_auto_beats_the_best_fixed_setting_chosen_knowing_each_answer(name: str) -> None:
    """Under the shipped GPU table, where a draft model pays on most text: auto, which must
    guess, against the one mode and K per answer picked knowing the answer (geometric means
    over the set)."""
    from specchat.bench.hindsight.replay import read_costs, replay
    from specchat.bench.live.runner import geomean

    results = replay(read_traces(TRACES / f"{name}.jsonl"), read_costs("gpu"))
    auto = geomean([r.speedup for r in results])
    assert auto >= geomean([r.best_fixed for r in results])
    assert auto > 1.5
