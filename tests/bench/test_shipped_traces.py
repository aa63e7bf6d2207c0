"""The recorded answers shipped with the bench: one per single-turn prompt of each set, whole,
so that `specchat bench --replay` can price every set on any machine."""

from __future__ import annotations

from pathlib import Path

import pytest

import specchat.bench
from specchat.bench.prompts import load_prompts, prompt_file
from specchat.bench.replay import read_traces

TRACES = Path(specchat.bench.__file__).parent / "traces"


@pytest.mark.parametrize("name", ["shipped", "everyday", "held-out"])
def test_each_set_has_a_whole_trace_per_single_turn_prompt(name: str) -> None:
    traces = read_traces(TRACES / f"{name}.jsonl")
    prompts = [p.id for p in load_prompts(prompt_file(name)) if p.turn_count == 1]
    assert [t.prompt for t in traces] == prompts
    for trace in traces:
        assert trace.answer and trace.draft is not None and trace.margins is not None
        assert len(trace.answer) <= 128
