"""The machine's pace: a slowdown prices every size alike and leaves no size's cost behind."""

from __future__ import annotations

import pytest

from specchat.engine.cost_table import CostTable, MachineCosts
from specchat.engine.costs import STALL_FACTOR, Pace
from specchat.engine.drafting.model import DraftModelDrafter

#: One target token and a pass of two on a 2-core CPU (ms), and a 0.5B draft token.
ONE, TWO, DRAFT = 50.0, 82.0, 20.0
#: Plain rounds of one answer while another program took the cores: a mild slowdown for
#: five rounds, then two stalled rounds (recorded on a 2-core machine, a bench run).
SLOWDOWN = (83.0, 83.0, 72.0, 77.0, 83.0, 206.0, 251.0)


def machine() -> MachineCosts:
    target = CostTable(sizes=(1, 2))
    draft = CostTable(sizes=(1,))
    for _ in range(2):
        target.record(1, ONE)
        target.record(2, TWO)
        draft.record(1, DRAFT)
    return MachineCosts(target, draft)


def test_a_slowdown_seen_by_one_size_does_not_make_another_look_cheap() -> None:
    costs = machine()
    for ms in SLOWDOWN:
        costs.observe_batch(1, ms)
    # Every size is dearer while the machine is slow, one as much as the other ...
    assert costs.cost_ms(1) > 2 * ONE and costs.cost_ms(2) > 2 * TWO
    # ... and once rounds of two run at their usual cost again, one token costs what it did:
    # no plain round comes to correct it, so nothing else would.
    for _ in range(20):
        costs.observe_batch(2, TWO)
    one, two = costs.cost_ms(1), costs.cost_ms(2)
    assert one is not None and two is not None
    # Learnt per size alone, a pass of 2 was left at 0.64 of one token's cost (and chosen
    # for a single row: plain's own pass).
    assert two / one > 0.88 * TWO / ONE
    assert one < 1.12 * ONE
    assert costs.pass_size(1) == 1


def test_the_draft_model_is_priced_at_the_same_pace() -> None:
    costs = machine()
    drafter = object.__new__(DraftModelDrafter)  # only its timing, not a model
    drafter.table = costs.draft
    for ms in SLOWDOWN[:3]:
        costs.observe_batch(1, ms)
    pace = costs.target.pace.factor
    assert pace > 1.3
    assert costs.draft_token_ms == pytest.approx(DRAFT * pace)
    assert drafter.draft_token_ms == pytest.approx(DRAFT * pace)
    # A drafted token seen while slow teaches the draft model's cost at the usual pace.
    assert costs.draft is not None
    costs.draft.observe(1, DRAFT * pace)
    assert costs.draft.pass_ms[1] == pytest.approx(DRAFT)
    # A cost file read from disk shares the pace the same way.
    loaded = MachineCosts.from_json(costs.to_json())
    assert loaded.draft is not None and loaded.draft.pace is loaded.target.pace


def test_a_lasting_change_moves_into_the_sizes_and_the_pace_returns_to_one() -> None:
    costs = machine()
    for _ in range(50):
        costs.observe_batch(1, 1.5 * ONE)  # a slower machine from now on (on battery)
    # Priced right at once, the size that did not run as well (through the pace, and the
    # drift against the offline samples) ...
    assert costs.cost_ms(1) == pytest.approx(1.5 * ONE, rel=0.05)
    assert costs.cost_ms(2) == pytest.approx(1.5 * TWO, rel=0.1)
    for _ in range(350):
        costs.observe_batch(1, 1.5 * ONE)
    # ... and in the long run the change is in the estimates, the pace back at one.
    assert costs.target.pace.factor == pytest.approx(1.0, abs=0.01)
    assert costs.target.pass_ms[1] == pytest.approx(1.5 * ONE, rel=0.01)
    assert costs.cost_ms(2) == pytest.approx(1.5 * TWO, rel=0.05)
    # Rounds at their estimates leave the pace where it is.
    pace = Pace()
    for _ in range(10):
        pace.observe(1.0)
    assert pace.factor == 1.0


def test_one_stalled_round_moves_the_pace_no_further_than_a_stall_is_believed() -> None:
    pace = Pace()
    pace.observe(1000.0)
    assert pace.factor == pytest.approx(1.0 + 0.5 * (STALL_FACTOR - 1.0))
    pace.observe(1.0)
    assert 1.0 < pace.factor < 1.0 + 0.5 * (STALL_FACTOR - 1.0)


def test_a_round_back_at_the_usual_pace_is_not_taken_for_a_stalled_measurement() -> None:
    costs = machine()
    for _ in range(10):
        costs.observe_batch(1, 5000.0)  # stalled rounds: the pace at its bound
    assert costs.target.pace.factor > 2.0
    costs.observe_batch(1, 0.9 * ONE)  # the machine is itself again (a quick round)
    # Measured well, and the round is no faster than that: the table keeps its samples and
    # its figure (a round far faster than the figure would mean the figure was stalled).
    assert costs.target.complete
    assert costs.target.pass_ms[1] > 0.9 * ONE  # judged at the lagging pace: 0.6 of it
