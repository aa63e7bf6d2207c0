"""A cost table measured while another program had the cores: small passes timed 70 times
their cost (llama.cpp's threads wait on each other), large ones after the machine was free."""

from __future__ import annotations

from specchat.engine.cost_table import SAMPLES, CostTable, MachineCosts

#: Q4_0 on the 2-core EPYC, ms by rows: what the passes cost on a free machine.
TRUE_MS = {1: 52.0, 2: 96.0, 4: 143.0, 8: 313.0, 16: 471.0, 32: 900.0, 64: 1900.0}
#: Sizes 1 … 16 were timed while a test suite ran beside the profiler (seen in a bench run).
STALLED_MS = 3400.0


def stalled_table(samples: int) -> CostTable:
    table = CostTable(sizes=tuple(TRUE_MS))
    for _ in range(samples):
        for n, ms in TRUE_MS.items():
            table.record(n, STALLED_MS if n <= 16 else ms)
    return table


def test_a_small_pass_timed_far_above_a_larger_one_is_sampled_again() -> None:
    """Such a size looks beaten by a larger pass; beyond what kernel structure explains it is
    a stall, and its second sample must set it right."""
    table = stalled_table(samples=1)
    owed = table.to_measure()
    assert {1, 2, 4, 8, 16} <= set(owed)
    for n in owed:
        table.record(n, TRUE_MS[n])
    assert table.pass_ms == TRUE_MS
    assert all(table.samples[n] == SAMPLES for n in (1, 2, 4, 8, 16))


def test_real_rounds_of_a_long_pass_unmask_stalled_small_sizes() -> None:
    """A complete table stored with stalled small sizes makes a pass of 32 look cheaper than
    one token, so every round drafts 31 and no plain round ever shows one token's real cost.
    One round of 32 rows at its figure must bring the small sizes below it, send the table to
    be measured again, and let plain be priced below a pass of 32."""
    costs = MachineCosts(stalled_table(samples=SAMPLES))
    prices = costs.price_list(32)
    assert prices is not None and prices[1] == prices[32]  # one token rounded up to 32 rows
    assert costs.target.complete
    costs.observe_batch(32, TRUE_MS[32])
    prices = costs.price_list(32)
    assert prices is not None
    assert prices[1] < TRUE_MS[32] / 4 and prices[1] < prices[2] < prices[32]
    assert not costs.target.complete  # measured again between answers
    assert 1 in costs.target.to_measure()
    # The background measurement then records the free machine's times.
    for n in costs.target.to_measure():
        costs.target.record(n, TRUE_MS[n])
    assert costs.target.pass_ms[1] <= TRUE_MS[1]
