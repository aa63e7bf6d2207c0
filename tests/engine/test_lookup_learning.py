"""Lookup learns its acceptance at every position; auto copies long runs in big passes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from specchat.engine.decoding.schedule import HURDLE, MAX_K, MAX_LOOKUP_K, SCORED_HURDLE, AutoPolicy
from specchat.engine.drafting import Draft, Outcome, PromptLookupDrafter
from specchat.engine.drafting.base import Answer, Drafter, Listing, Offer
from specchat.engine.drafting.copies.copy_acceptance import LookupLedger
from specchat.engine.types import PolicyChoice, SamplingParams

# Costs shaped like a 2-core CPU: one row 36 ms, then ≈ 20 ms a row at 16 and 13 at 64.
CPU_COSTS = {1: 36.0, 2: 60.0, 4: 100.0, 8: 220.0, 16: 330.0, 32: 500.0, 64: 830.0}
NO_DRAFT = Draft((), None, 0.0, "plain")


def test_ledger_scores_each_token_once_as_the_text_reaches_it() -> None:
    ledger = LookupLedger()
    ledger.note(10, (1, 2, 3, 4), match_len=7, regime=None)
    text = list(range(10))
    assert ledger.settle(text) == []  # nothing written after position 10 yet
    assert ledger.settle([*text, 1, 2]) == [(7, None, 0, 2, False)]  # two kept, still open
    assert len(ledger) == 1
    assert ledger.settle([*text, 1, 2, 9]) == [(7, None, 2, 0, True)]  # third refused: closed
    assert len(ledger) == 0


def test_ledger_closes_a_proposal_kept_to_its_end() -> None:
    ledger = LookupLedger()
    ledger.note(0, (5, 6), match_len=2, regime=True)
    assert ledger.settle([5, 6, 8]) == [(2, True, 0, 2, False)]
    assert len(ledger) == 0


def _policy() -> AutoPolicy:
    policy = AutoPolicy()
    policy.costs.seed(CPU_COSTS)
    return policy


def _choose(
    policy: AutoPolicy, lookup: PromptLookupDrafter, length: int, match_len: int
) -> PolicyChoice:
    return policy.choose([lookup.offer_match(min(length, MAX_LOOKUP_K), match_len)])


def _settle(lookup: PromptLookupDrafter, text: list[int]) -> None:
    lookup.observe(Outcome(text, NO_DRAFT, 0))


def test_a_refused_bucket_recovers_from_text_it_never_drafted() -> None:
    policy, lookup = _policy(), PromptLookupDrafter()
    # Long matches were refused at once a dozen times: auto stops drafting from them.
    for start in range(12):
        lookup.copies.note(start * 2, (1,) * 8, match_len=20)
        _settle(lookup, [0] * (start * 2 + 1))
    assert _choose(policy, lookup, 40, 20).mode == "plain"
    # Then the text goes on copying what lookup proposes while auto decodes plainly.
    text: list[int] = []
    for _ in range(40):
        proposal = tuple(range(len(text), len(text) + 30))
        lookup.copies.note(len(text), proposal, match_len=20)
        text.append(len(text))
        _settle(lookup, text)
    choice = _choose(policy, lookup, 40, 20)
    assert choice.mode == "lookup" and choice.k > MAX_K


def test_offers_are_scored_whether_drafted_or_not() -> None:
    lookup = PromptLookupDrafter()
    text = [1, 2, 3, 4, 1, 2]
    offer = lookup.offer(text, 8, None)
    assert offer is not None and offer.k_max == 4  # "3 4 1 2" follows the earlier "1 2"
    assert len(lookup.copies.ledger) == 0  # an offer alone changes nothing...
    before = lookup.copies.estimate(2).reached[0]
    _settle(lookup, [*text, 3])  # ... the round scores it: decoded plainly, text as proposed
    assert lookup.copies.estimate(2).reached[0] > before


def test_short_matches_are_not_worth_a_pass_on_a_cpu() -> None:
    assert _choose(_policy(), PromptLookupDrafter(), 40, 1).mode == "plain"


def test_a_marginal_gain_is_not_worth_the_risk() -> None:
    # A 4-token match promises about 1.06× plain on these costs: taken without a hurdle,
    # refused with a copy's 20 % one, and the reason says what it would have needed.
    offer = PromptLookupDrafter().offer_match(40, 4)
    assert offer.hurdle == SCORED_HURDLE
    assert _policy().choose([replace(offer, hurdle=0.0)]).mode == "lookup"
    choice = _policy().choose([offer])
    assert choice.mode == "plain"
    assert "the 1.20× it needs" in choice.reason


def test_a_new_answer_starts_from_the_priors() -> None:
    fresh = _choose(_policy(), PromptLookupDrafter(), 40, 20)
    policy, lookup = _policy(), PromptLookupDrafter()
    lookup.begin(Answer(prompt=[]))
    text: list[int] = []
    for _ in range(40):  # one answer copies on and on
        lookup.copies.note(len(text), tuple(range(len(text), len(text) + 30)), match_len=20)
        text.append(len(text))
        _settle(lookup, text)
    assert _choose(policy, lookup, 40, 20).k > fresh.k
    lookup.begin(Answer(prompt=[0] * 500))  # the next answer learns afresh
    assert _choose(policy, lookup, 40, 20) == fresh


class _Offering(Drafter):
    """A drafter offering one draft token at a set expected gain over plain."""

    name = "offering"
    listing = Listing(label="Offering")
    probed = False

    def __init__(self, gain: float) -> None:
        super().__init__()
        self.gain = gain

    def offer(
        self, context: Sequence[int], k_cap: int, prices: Sequence[float] | None
    ) -> Offer | None:
        # One row more than plain costs CPU_COSTS[2]: tokens for `gain` × plain's rate.
        curve = [1.0, self.gain * CPU_COSTS[2] / CPU_COSTS[1]]
        if self.probed:
            return Offer(source=self.name, k_max=1, curve=curve, hurdle=HURDLE, probed=True)
        return Offer(source=self.name, k_max=1, curve=curve)

    def propose(
        self, context: Sequence[int], k: int, sampling: SamplingParams, rng: np.random.Generator
    ) -> Draft:
        return Draft((1,), None, 0.0, self.name)


class _ProbedOffering(_Offering):
    name = "probed-offering"
    probed = True


def test_a_scored_drafter_needs_a_clearer_gain_than_one_learnt_from_its_own_rounds() -> None:
    gain = 1.15
    # A copy is scored at every position, drafted or not: waiting costs it no knowledge. The
    # draft model calibrates its estimate only when used, so a gain that clears HURDLE is
    # enough for it.
    assert 1.0 + HURDLE < gain < 1.0 + SCORED_HURDLE
    scored, probed = _Offering(gain), _ProbedOffering(gain)
    offers = [scored.offer([], 1, None), probed.offer([], 1, None)]
    assert all(offer is not None for offer in offers)
    assert _policy().choose(offers[:1]).mode == "plain"  # type: ignore[list-item]
    assert _policy().choose(offers[1:]).mode == probed.name  # type: ignore[list-item]
    # Side by side the same gain goes to the one whose hurdle it clears.
    both = offers
    assert _policy().choose(both).mode == probed.name  # type: ignore[arg-type]
