"""What `auto` chooses, round by round on the shipped prompts with pinned costs: the best
offer, never one below its hurdle, plain where nothing clears it."""

from __future__ import annotations

import math

import pytest

from specchat.engine.decoding.schedule import REFERENCE_ROUNDS, AutoPolicy
from specchat.engine.drafting import PLAIN
from specchat.tinymodels import TinyModels
from tests.helpers.policy_choices import TABLES, Decision, PinnedCosts, decisions


def _rates(decision: Decision) -> dict[str, tuple[int, float, float]]:
    """Per drafter: its best K, its rate over plain's, and the rate it needs."""
    prices = decision.prices
    out = {}
    for offer in decision.offers:
        k, rate = AutoPolicy.best_k(offer, prices, decision.budget)
        out[offer.source] = (k, rate * prices[1], 1.0 + offer.hurdle)
    return out


@pytest.mark.parametrize("costs", TABLES, ids=[t.name for t in TABLES])
def test_auto_takes_the_best_offer_and_none_below_its_hurdle(
    tiny_models: TinyModels, costs: PinnedCosts
) -> None:
    made = decisions(tiny_models.target, tiny_models.draft_close, costs)
    drafted = references = 0
    for decision in made:
        choice, rates = decision.choice, _rates(decision)
        if "timing one token" in choice.reason:
            references += 1  # the plain round every price scales by, now and then
        elif "probing" in choice.reason:
            # A probe: K = 1 of a drafter learnt only from its own rounds, when none pays.
            assert choice.k == 1 and all(speed < needs for _, speed, needs in rates.values())
        elif choice.mode == PLAIN:
            assert all(speed <= needs for _, speed, needs in rates.values()), choice.reason
            for name, (_, speed, needs) in rates.items():
                shown = math.floor(speed * 100) / 100
                assert f"{shown:.2f}×, below the {needs:.2f}× it needs" in choice.reason, name
        else:
            drafted += 1
            k, speed, needs = rates[choice.mode]
            # A drafter that sizes its own draft is priced at its best K and asked for up
            # to its longest.
            [offer] = [o for o in decision.offers if o.source == choice.mode]
            assert choice.k == (offer.k_max if offer.sizes_itself else k), choice.reason
            assert speed > needs, choice.reason
            # The best of the offers, each discounted by its hurdle.
            assert speed / needs == max(s / n for _, s, n in rates.values())
            # The reason says the expected speed-up and the bar, and they agree.
            shown = math.ceil(speed * 100) / 100
            assert f"≈ {shown:.2f}× plain (it needs {needs:.2f}×)" in choice.reason
    assert drafted > 0  # the property was exercised
    assert references <= 1 + drafted // REFERENCE_ROUNDS
