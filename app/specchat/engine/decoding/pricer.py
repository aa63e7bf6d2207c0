"""The target's price of a round, for the policy that owns it: shape × scale at the cache's
depth, the rollback a recurrent cache pays, and the size of the pass that holds a draft."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from specchat.engine.costs.machine import MachineCosts
from specchat.engine.drafting.base import Offer
from specchat.engine.llamacpp.recurrent_state import Rollback


@dataclass(frozen=True)
class RoundContext:
    """What the round loop knows of the round it is about to run, handed to the policy with
    every call that prices it (the policy keeps none of it: a round is priced where the
    target's cache stands then, and the next round stands elsewhere).

    Attributes:
        depth: tokens in the target's cache before the round's pass (None: the cost table's
            own depth): attention over the cache grows every row's cost.
        budget: tokens the answer may still write (None: no limit known): what a drafter's
            one-off cost can be spread over.
        rollback: how the target drops a round's rejected drafts.
        snapshot_depth: drafts llama.cpp's state snapshots can drop for nothing (a recurrent
            target's `n_rs_seq`; 0 otherwise).
        largest_pass: rows the round's pass can hold at most (None: no limit known): near
            the answer's or the context's end a larger pass cannot be made, so its price is
            no price for the round's draft.
    """

    depth: int | None = None
    budget: int | None = None
    rollback: Rollback = Rollback.CACHE
    snapshot_depth: int = 0
    largest_pass: int | None = None


class Pricer:
    """Prices the target's part of a round: the one place a target pass gets a price.

    A pass over n rows costs the cheapest pass holding them (the machine's table: a shape
    measured outside answers times one token's time learnt from real rounds, plus attention
    over the cache's depth: engine/costs/table.py); dropping rejected drafts costs a
    recurrent target a checkpoint round trip and a re-read (see rollback_ms); and real rounds
    correct the table at the depth they ran at.

    Attributes:
        costs: the machine's cost tables (the target's is the one priced here; drafters price
            their own part from theirs).
        limit: the largest pass a round may make, in rows: every round is priced up to it.
    """

    def __init__(self, costs: MachineCosts, *, limit: int) -> None:
        self.costs = costs
        self.limit = limit

    def prices(self, at: RoundContext) -> list[float] | None:
        """The target's time to check n tokens at the round's depth, by n up to `limit`
        (index 1 is plain's token), priced once a round rather than once per drafter and
        length; None before anything is measured."""
        return self.costs.target.price_list(self.limit, at.depth, largest=at.largest_pass)

    def target_ms(self, n: int, at: RoundContext) -> float | None:
        """Time to check n tokens in one target pass (the cheapest pass holding them)."""
        return self.costs.target.target_ms(n, at.depth, largest=at.largest_pass)

    def pass_size(self, n: int, at: RoundContext) -> int:
        """Rows of the pass that checks n tokens: n, or a larger size real rounds have shown
        costs no more (its spare rows can carry more draft tokens for nothing)."""
        return self.costs.target.pass_size(n, at.depth, largest=at.largest_pass)

    def with_rollback(
        self, offers: Sequence[Offer], prices: Sequence[float] | None, at: RoundContext
    ) -> list[Offer]:
        """`offers` with the rollback each would cost added to its one-off cost."""
        if prices is None or at.rollback is Rollback.CACHE:
            return list(offers)
        return [
            replace(offer, extra_ms=offer.extra_ms + self.rollback_ms(offer, prices, at))
            for offer in offers
        ]

    def rollback_ms(self, offer: Offer, prices: Sequence[float], at: RoundContext) -> float:
        """The expected extra time of a round drafting from `offer`, for dropping its rejected
        tokens: nothing for an attention cache, nor for llama.cpp's state snapshots within
        their depth; else the measured checkpoint round trip plus evaluating the kept tokens
        and the round's own token again (priced as the pass holding the tokens the offer
        expects)."""
        if at.rollback is Rollback.CACHE:
            return 0.0
        if at.rollback is Rollback.SNAPSHOTS and offer.k_max <= at.snapshot_depth:
            return 0.0
        expected = offer.curve[offer.k_max] if offer.curve else 1.0
        rows = min(len(prices) - 1, max(1, round(expected)))
        return (self.costs.target.checkpoint_ms or 0.0) + prices[rows]

    def observe(self, rows: int, ms: float, at: RoundContext) -> None:
        """A real round's target pass of `rows` took `ms`, at the round's depth."""
        self.costs.observe_batch(rows, ms, at.depth)
