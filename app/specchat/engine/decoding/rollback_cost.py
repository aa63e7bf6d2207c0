"""What dropping a round's rejected drafts costs a target whose cache is recurrent."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from specchat.engine.costs.table import MachineCosts
from specchat.engine.drafting import Offer
from specchat.engine.llamacpp.recurrent_state import Rollback
from specchat.engine.llamacpp.target import Target


def rollback_ms(
    target: Target, costs: MachineCosts, offer: Offer, prices: Sequence[float]
) -> float:
    """The expected extra time of a round drafting from `offer`, for dropping its rejected
    tokens: nothing for an attention cache, nor for llama.cpp's state snapshots within their
    depth; else the measured checkpoint round trip plus evaluating the kept tokens and the
    round's own token again (priced as the pass holding the tokens the offer expects)."""
    if target.rollback is Rollback.CACHE:
        return 0.0
    if target.rollback is Rollback.SNAPSHOTS and offer.k_max <= target.snapshot_depth:
        return 0.0
    expected = offer.curve[offer.k_max] if offer.curve else 1.0
    rows = min(len(prices) - 1, max(1, round(expected)))
    return (costs.target.checkpoint_ms or 0.0) + prices[rows]


def priced_for_rollback(
    target: Target, costs: MachineCosts, offers: Sequence[Offer], prices: Sequence[float] | None
) -> list[Offer]:
    """`offers` with the rollback each would cost added to its one-off cost."""
    if prices is None or target.rollback is Rollback.CACHE:
        return list(offers)
    return [
        replace(offer, extra_ms=offer.extra_ms + rollback_ms(target, costs, offer, prices))
        for offer in offers
    ]
