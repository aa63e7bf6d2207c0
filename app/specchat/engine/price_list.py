"""The target's price for every draft length at once: what `auto` reads each round."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specchat.engine.cost_table import CostTable


def price_list(table: CostTable, limit: int, context: int | None) -> list[float] | None:
    """`table.target_ms(n, context)` for every n from 1 to `limit` (index n; index 0 unused),
    in one backward pass over the sizes; None before any time.

    `auto` prices dozens of draft lengths for every drafter each round, plain rounds
    included, and asking `target_ms` for each would scan the table once per length. Each
    size is priced once, by `cost_ms`, so the prices are the same floats.
    """
    if not table.pass_ms:
        return None
    timed = _timed_costs(table, context)
    top = table.sizes[-1]
    prices = [0.0] * (limit + 1)
    # The cheapest measured (or seen) pass above n, ties to the larger, as pass_size().
    best_ms, best = float("inf"), 0
    for m, ms in timed.items():
        if limit < m <= top and (ms < best_ms or (ms == best_ms and m > best)):
            best_ms, best = ms, m
    for n in range(limit, 0, -1):
        own = timed.get(n)
        if own is None:
            own = table.cost_ms(n, context)  # a partial table's guess
            assert own is not None
        elif n <= top and (own < best_ms or (own == best_ms and n > best)):
            prices[n] = own
            best_ms, best = own, n
            continue
        prices[n] = best_ms if best_ms < own else own
    return prices


def _timed_costs(table: CostTable, context: int | None) -> dict[int, float]:
    """`table.cost_ms(m, context)` for every timed size m, as the same floats.

    The same arithmetic as CostTable._timed_ms plus growth_ms, in one loop over local names:
    a method call per size was half of the price list's time each round (≈ 30 of 60 µs on a
    2-core CPU), paid in plain rounds too. tests/engine/test_cost_table.py holds the two
    to exact equality.
    """
    factor, drift = table.pace.factor, table.drift
    fresh, offline = table.fresh, table.offline_ms
    # growth_ms's product, kept in its order: (factor · slope) · n · depth / 1000.
    slope = factor * table.slope_ms if context is not None and table.slope_ms else None
    depth = 0 if context is None else context - table.context_tokens
    costs: dict[int, float] = {}
    for m, ms in table.pass_ms.items():
        share = fresh.get(m, 0.0)
        if share and drift != 1.0:
            ms += share * offline.get(m, ms) * (drift - 1.0)
        ms *= factor
        costs[m] = ms if slope is None else ms + slope * m * depth / 1000.0
    return costs
