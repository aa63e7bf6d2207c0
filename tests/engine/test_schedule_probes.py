"""AutoPolicy probes only drafters that could pay, and backs off probes that change nothing."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from specchat.engine.costs.priors import CLIP, GAIN
from specchat.engine.costs.table import DRAFT_SIZES, CostTable
from specchat.engine.decoding.pricer import RoundContext
from specchat.engine.decoding.schedule import AutoPolicy
from specchat.engine.drafting import (
    Acceptance,
    DraftModelDrafter,
    Offer,
    PromptLookupDrafter,
)
from specchat.engine.types import PolicyChoice

PLAIN = PolicyChoice("plain", 0, "")


class _Lagging:
    """What the draft model's offer reads of its model: how much of the text it has seen."""

    def __init__(self) -> None:
        self.lag = 0

    def cached_prefix(self, context: Sequence[int]) -> int:
        return max(0, len(context) - self.lag)


class _Timed(DraftModelDrafter):
    """The draft model's real offer without a model: its costs and lag set by hand."""

    def __init__(self, token_ms: float | None) -> None:
        self.lagging = _Lagging()
        super().__init__(self.lagging)  # type: ignore[arg-type]  # never drafts, only offers
        self.draft_token_ms = token_ms

    @property
    def lag(self) -> int:
        return self.lagging.lag

    @lag.setter
    def lag(self, lag: int) -> None:
        self.lagging.lag = lag

    @property
    def acceptance(self) -> Acceptance:
        return self._acceptance

    @acceptance.setter
    def acceptance(self, acceptance: Acceptance) -> None:
        self._acceptance = acceptance

    def priced(self, policy: AutoPolicy | None = None) -> Offer:
        prices = policy.prices() if policy is not None else None
        offer = self.offer([0] * (self.lag + 1), 16, prices)
        assert offer is not None
        return offer


def _policy(batch_ms: dict[int, float], draft_token_ms: float | None) -> tuple[AutoPolicy, _Timed]:
    policy = AutoPolicy(probe_interval=4)
    policy.costs.seed(batch_ms)
    return policy, _Timed(draft_token_ms)


def _choose(policy: AutoPolicy, drafter: _Timed, *, lookup_len: int = 0) -> PolicyChoice:
    offers: list[Offer] = []
    if lookup_len:
        offers.append(PromptLookupDrafter().offer_match(lookup_len, 4))
    offers.append(drafter.priced(policy))
    return policy.choose(offers)


def _plain_rounds(policy: AutoPolicy, n: int) -> None:
    for _ in range(n):
        policy.observe(
            PLAIN, batch=1, verify_ms=policy.costs.target.pass_ms[1], drafted=0, accepted=0
        )


def test_a_drafter_that_loses_even_at_perfect_acceptance_is_never_probed() -> None:
    # A batch of n costs n single tokens: no K pays, whatever the acceptance.
    linear = {n: 10.0 * n for n in range(1, 18)}
    policy, drafter = _policy(linear, draft_token_ms=3.0)
    assert not policy.could_pay(drafter.priced(policy))
    assert not policy.could_pay(PromptLookupDrafter().offer_match(16, 4))
    _plain_rounds(policy, 40)
    assert all(_choose(policy, drafter, lookup_len=8).mode == "plain" for _ in range(5))


def test_a_drafter_that_could_pay_is_still_probed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("specchat.engine.decoding.schedule.PROBE_BUDGET", 1.0)
    # GPU-like: extra rows are nearly free.
    cheap = {n: 10.0 + 0.1 * (n - 1) for n in range(1, 18)}
    policy, drafter = _policy(cheap, draft_token_ms=1.0)
    drafter.acceptance.first_kept, drafter.acceptance.first_trials = 0.0, 50.0
    assert policy.could_pay(drafter.priced(policy))
    _plain_rounds(policy, 5)
    choice = _choose(policy, drafter)
    assert (choice.mode, choice.k) == ("draft", 1) and "probing" in choice.reason


def test_a_kept_probe_that_leaves_plain_ahead_backs_off(monkeypatch: pytest.MonkeyPatch) -> None:
    # Costs where the draft pays only near α = 1; the estimate stays far below that. (The
    # budget is lifted so that a probe is made at all after four rounds.)
    monkeypatch.setattr("specchat.engine.decoding.schedule.PROBE_BUDGET", 1.0)
    costs = {1: 10.0, 2: 11.0, 3: 12.0, 4: 13.0, 5: 14.0}
    policy, drafter = _policy(costs, draft_token_ms=4.0)
    drafter.acceptance.first_kept, drafter.acceptance.first_trials = 1.0, 20.0
    _plain_rounds(policy, 5)
    probe = _choose(policy, drafter)
    assert probe.mode == "draft"
    drafter.acceptance.update(1, 1)  # what the drafter learns from the kept probe token
    policy.observe(probe, batch=2, verify_ms=11.0, drafted=1, accepted=1)
    # The next probe waits twice as long as the first did (8 plain rounds, not 4).
    gap = 0
    while (choice := _choose(policy, drafter)).mode != "draft":
        policy.observe(choice, batch=1, verify_ms=10.0, drafted=0, accepted=0)
        gap += 1
        assert gap < 100, "never probed again"
    print(f"next probe after {gap} plain rounds")
    assert gap >= 8


def test_a_drafted_token_stored_stalled_is_still_probed_and_timed_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GPU-like costs; the draft's table read from a file at 30 ms a token, three plain
    # tokens (stored stalled): at that price the draft could not pay even at α = 1, so no
    # round or probe would ever time it again.
    monkeypatch.setattr("specchat.engine.decoding.schedule.PROBE_BUDGET", 1.0)
    cheap = {n: 10.0 + 0.1 * (n - 1) for n in range(1, 18)}
    policy, drafter = _policy(cheap, draft_token_ms=None)
    stalled = CostTable(sizes=DRAFT_SIZES, pass_ms={1: 30.0, 2: 31.0}, samples={1: 2, 2: 2})
    drafter.table = CostTable.from_json(stalled.to_json())
    drafter.acceptance.first_kept, drafter.acceptance.first_trials = 0.0, 50.0
    offer = drafter.priced(policy)
    assert offer.token_ms == pytest.approx(30.0)  # rounds are still priced as stored
    assert policy.could_pay(offer)  # but the price a probe is judged by is the prior's
    _plain_rounds(policy, 5)
    probe = _choose(policy, drafter)
    assert (probe.mode, probe.k) == ("draft", 1) and "probing" in probe.reason
    drafter.observe_draft(1, 2.0)  # the probe times a drafted token: 2 ms, which moves
    timed = drafter.priced(policy)  # the price CLIP times toward it in one round
    assert timed.token_ms == pytest.approx(30.0 / CLIP) and timed.probe_token_ms == timed.token_ms
    # A price this process measured is judged as it is: 30 ms measured now keeps the
    # drafter from probes.
    drafter.draft_token_ms = 30.0
    assert not policy.could_pay(drafter.priced(policy))


def test_copied_runs_value_long_drafts() -> None:
    """Acceptance that continues in runs makes a long draft worth more than i.i.d."""
    from specchat.engine.drafting import Acceptance, expected_tokens

    runs = Acceptance.prior(0.5, 0.5, weight=1.0)
    for _ in range(60):  # half the drafts fail at once; the rest copy all 8 tokens
        runs.update(8, 0)
        runs.update(8, 8)
    assert runs.alpha == pytest.approx(0.5, abs=0.05)
    assert runs.continued > 0.95
    assert runs.expected(8) > expected_tokens(0.5, 8) + 2.5


def test_the_offered_curve_is_acceptance_expected_at_every_k() -> None:
    """The curve a drafter offers each round is Acceptance.expected(k), float for float, in
    every regime (runs that go on, K = 1 only, no trials): it works the rates out once."""
    drafter = _Timed(5.0)
    cases = [(0.5, 0.5, 1.0, [(8, 0), (8, 8)] * 30), (0.6, 0.6, 2.0, [(1, 1)] * 40)]
    for alpha, continued, weight, rounds in [*cases, (0.3, 0.9, 0.0, [])]:
        drafter.acceptance = Acceptance.prior(alpha, continued, weight=weight)
        for drafted, kept in rounds:
            drafter.acceptance.update(drafted, kept)
        curve = drafter.priced().curve
        assert curve == [drafter.acceptance.expected(k) for k in range(17)]


def test_a_stall_does_not_poison_the_cost_model() -> None:
    policy = AutoPolicy()
    policy.costs.seed({1: 50.0, 2: 90.0})
    policy.costs.observe_batch(1, 5000.0)  # a stalled round moves the price by CLIP ** GAIN
    assert policy.costs.target_ms(1) == pytest.approx(50.0 * CLIP**GAIN)
    policy.costs.observe_batch(1, 50.0)  # a round at the usual cost sets it back at once
    assert policy.costs.target_ms(1) == pytest.approx(50.0)


def test_a_long_idle_draft_model_is_not_probed_where_catching_up_is_dear() -> None:
    # CPU-like costs where the draft could pay at α = 1, but a 300-token catch-up costs far
    # more than the probing budget allows.
    costs = {1: 40.0, 2: 44.0, 3: 48.0, 4: 52.0, 5: 56.0, 17: 100.0}
    policy, drafter = _policy(costs, draft_token_ms=4.0)
    drafter.catchup_token_ms = 5.0
    _plain_rounds(policy, 40)
    drafter.lag = 300
    assert _choose(policy, drafter).mode == "plain"
    drafter.lag = 2
    assert _choose(policy, drafter).mode == "draft"


def test_a_drafter_used_only_at_k1_learns_that_runs_go_on() -> None:
    """Kept K = 1 drafts raise the continued rate with α: a fixed prior there would hold K
    at 1 for good, however often every draft is kept."""
    from specchat.engine.drafting import Acceptance

    acceptance = Acceptance.prior(0.6, 0.6)
    for _ in range(40):
        acceptance.update(1, 1)
    assert acceptance.alpha > 0.95
    assert acceptance.continued > 0.95


def _paying_draft_behind() -> tuple[AutoPolicy, _Timed]:
    """GPU-like: the draft pays well in step, and catching up 60 tokens costs four plain
    tokens."""
    cheap = {n: 10.0 + 0.5 * (n - 1) for n in range(1, 18)}
    policy, drafter = _policy(cheap, draft_token_ms=1.0)
    drafter.catchup_token_ms = 40.0 / 60
    drafter.acceptance.first_kept, drafter.acceptance.first_trials = 18.0, 20.0
    drafter.acceptance.cont_kept, drafter.acceptance.cont_trials = 18.0, 20.0
    drafter.lag = 60
    return policy, drafter


def test_a_catch_up_is_spread_over_the_rounds_after_it() -> None:
    # Paid once, the catch-up is won back within two rounds; charged to one round, never.
    policy, drafter = _paying_draft_behind()
    choice = _choose(policy, drafter)
    assert choice.mode == "draft" and choice.k > 1, choice.reason


def test_a_catch_up_is_spread_over_no_more_rounds_than_the_answer_has_left() -> None:
    # As above, but the answer may write 6 more tokens: one or two rounds, which cannot win
    # back four plain tokens' catch-up.
    policy, drafter = _paying_draft_behind()
    at = RoundContext(budget=6)
    for lag, chosen in ((60, "plain"), (2, "draft")):  # in step, nothing to win back
        drafter.lag = lag
        # The decoder drafts no further than the budget either.
        assert at.budget is not None
        offer = drafter.offer([0] * (lag + 1), at.budget - 1, policy.prices(at))
        assert offer is not None
        assert policy.choose([offer], at=at).mode == chosen


def test_a_draft_model_sat_out_a_whole_prompt_comes_back_where_catching_up_is_cheap() -> None:
    """A GPU evaluates unseen text in one pass for a fraction of a drafted token: priced at
    the measured batched rate, catching up on a 500-token prompt is worth it; priced at the
    guess for an unmeasured machine (0.3 of a drafted token each), it is not, and a draft
    model that was not readied for an answer would sit the whole answer out."""
    from specchat.engine.costs.table import CostTable

    gpu = {n: 10.0 + 0.1 * (n - 1) for n in range(1, 18)}
    policy, drafter = _policy(gpu, draft_token_ms=1.5)
    drafter.acceptance.first_kept, drafter.acceptance.first_trials = 14.0, 20.0
    drafter.lag = 500
    assert _choose(policy, drafter).mode == "plain"
    drafter.table = CostTable(sizes=(1,), pass_ms={1: 1.5}, catchup_row_ms=0.05)
    assert _choose(policy, drafter).mode == "draft"


def test_a_catch_up_is_not_probed_where_it_would_land_on_one_answer() -> None:
    """Probes that keep failing stretch the interval, and with it the budget: after 1,024
    rounds a 1 s catch-up fits 3 % of them. All of it lands on the answer that probes, so
    the catch-up must also fit 3 % of that answer's plain time so far."""
    costs = {1: 40.0, 2: 44.0, 3: 48.0, 4: 52.0, 5: 56.0, 17: 100.0}
    policy, drafter = _policy(costs, draft_token_ms=4.0)
    drafter.catchup_token_ms = 5.0
    policy._probe_interval[drafter.name] = 1024  # many probes failed before
    _plain_rounds(policy, 1100)
    drafter.lag = 200  # a 1,000 ms catch-up: within 3 % of 1,024 plain rounds (1,229 ms)
    policy.begin_answer()
    _plain_rounds(policy, 100)  # this answer so far: 3 % of 100 rounds is 120 ms
    assert _choose(policy, drafter).mode == "plain"
    _plain_rounds(policy, 800)  # a long answer: 3 % of 900 rounds is 1,080 ms
    choice = _choose(policy, drafter)
    assert (choice.mode, choice.k) == ("draft", 1) and "probing" in choice.reason
