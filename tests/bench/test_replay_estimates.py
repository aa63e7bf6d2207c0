"""The replay's one seam for estimates: every drafter it builds starts where the given
Estimates say (tools/replay_with_hindsight.py fits them through it, with no monkeypatch)."""

from __future__ import annotations

from pathlib import Path

from specchat.bench.hindsight.replay import read_costs, read_traces, replay
from specchat.engine.drafting import Drafter, Estimates
from specchat.engine.drafting.copies.copying import CopyDrafter

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
