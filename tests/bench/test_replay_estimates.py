"""The replay's one seam for estimates: every drafter it builds starts where the given
Estimates say (tools/replay_with_hindsight.py fits them through it, with no monkeypatch)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specchat.bench.hindsight.replay import read_costs, read_traces, replay
from specchat.engine.drafting import Drafter, Estimates
from specchat.engine.drafting.copies.copying import CopyDrafter
from specchat.engine.drafting.stored_estimates import FileEstimates

ROUNDS = Path(__file__).parent / "data" / "default-pair-rounds.jsonl"


class _Counting(Estimates):
    """Keeps the priors; counts the drafters it was handed, by name."""

    def __init__(self) -> None:
        self.started: dict[str, int] = {}

    def start(self, drafter: Drafter) -> None:
        self.started[drafter.name] = self.started.get(drafter.name, 0) + 1


class _NeverCopies(Estimates):
    """Starts every copying drafter sure that no copy is ever kept."""

    def start(self, drafter: Drafter) -> None:
        if isinstance(drafter, CopyDrafter):
            for estimates in drafter.copies._survival.values():
                for estimate in estimates:
                    estimate._prior_refused = [1e9] * len(estimate._prior_refused)
                    estimate._prior_reached = [1e9] * len(estimate._prior_reached)


def test_the_priors_replay_as_without_the_seam_and_every_drafter_passes_through_it() -> None:
    traces = read_traces(ROUNDS)[:3]
    costs = read_costs("gpu")
    counting = _Counting()
    seamed = replay(traces, costs, estimates=counting)
    assert [r.auto_ms for r in seamed] == [r.auto_ms for r in replay(traces, costs)]
    # One decoder per answer: each of its drafters started once.
    assert counting.started and set(counting.started.values()) == {len(seamed)}
    assert "lookup" in counting.started


def test_estimates_given_through_the_seam_steer_the_replay() -> None:
    traces = read_traces(ROUNDS)
    costs = read_costs("gpu")
    copied = sum(
        r.rounds.get("lookup", 0) + r.rounds.get("suffix", 0) for r in replay(traces, costs)
    )
    assert copied > 0
    never = replay(traces, costs, estimates=_NeverCopies())
    assert sum(r.rounds.get("lookup", 0) + r.rounds.get("suffix", 0) for r in never) < copied


#: What a store held after a held-out bench of the default pair on a 2-core AVX-512 Xeon
#: (cache/costs/estimates/*.json, as written): the draft model's text acceptance, its
#: calibrations and its rounds' rates.
STORED = Path(__file__).parent / "data" / "xeon-held-out-estimates.json"


def test_a_stored_estimates_file_starts_the_replay_where_a_fresh_server_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """At the priors the replay never drafts with the draft model on the Xeon's curve; a
    fresh server of the pair starts from what its store learnt, and drafts with it."""
    from specchat.cli import main

    traces, costs = read_traces(ROUNDS), read_costs("xeon")
    at_priors = sum(r.rounds.get("draft", 0) for r in replay(traces, costs))
    stored = replay(traces, costs, estimates=FileEstimates(STORED))
    assert at_priors == 0 and sum(r.rounds.get("draft", 0) for r in stored) > 0

    out = tmp_path / "out"
    argv = ["bench", "--replay", str(ROUNDS), "--costs", "xeon", "--estimates", str(STORED)]
    assert main([*argv, "--out", str(out)]) == 0
    report = json.loads((out / "replay.json").read_text(encoding="utf-8"))
    assert [p["auto_ms"] for p in report["prompts"]] == pytest.approx(
        [r.auto_ms for r in stored], abs=0.01
    )

    # A file that is not one says so, and nothing is replayed.
    capsys.readouterr()
    for text, words in (("{not json", "not JSON"), ('{"version": 0}', "another version")):
        bad = tmp_path / "bad.json"
        bad.write_text(text, encoding="utf-8")
        assert main([*argv[:-1], str(bad)]) == 2
        assert words in capsys.readouterr().err
