"""`auto` bounds what drafting can cost an answer against plain, whatever its drafters guess:
a draft whose estimate is wrong (a prior, a match length's average over other texts) stops
within a few rounds, having lost a few per cent of the answer's plain time at most, while
drafting that pays earns itself long drafts."""

from __future__ import annotations

from specchat.engine.costs.priors import REGRET_SEED, REGRET_SHARE
from specchat.engine.decoding.pricer import RoundContext
from specchat.engine.decoding.schedule import AutoPolicy
from specchat.engine.drafting import Offer
from specchat.engine.drafting.registry import PLAIN

#: A 2-core CPU's passes: rows get cheaper per row the larger the pass (prior shape).
CPU_PASSES = {1: 28.0, 2: 45.6, 4: 73.1, 8: 127.7, 16: 144.5, 32: 257.9, 64: 490.0}


def _policy() -> AutoPolicy:
    policy = AutoPolicy()
    policy.costs.seed(CPU_PASSES)
    policy.begin_answer()
    return policy


def _confident(alpha: float = 0.9, k_max: int = 63, first: float | None = None) -> Offer:
    """A copy sure of itself that never learns otherwise: its first token kept with
    probability `first` (default `alpha`), each later one with `alpha`."""
    first = alpha if first is None else first
    curve = [1.0]
    for k in range(1, k_max + 1):
        curve.append(curve[-1] + first * alpha ** (k - 1))
    return Offer(source="suffix", k_max=k_max, curve=curve, detail="a long match")


def _worst(k: int) -> float:
    """What a round of k copied tokens, all refused, loses against plain (CPU_PASSES)."""
    prices = _policy().prices()
    assert prices is not None
    return prices[k + 1] - prices[1]


def _run(policy: AutoPolicy, offer: Offer, rounds: int, *, kept: float) -> tuple[float, float, int]:
    """`rounds` rounds of auto over `offer`, each draft keeping `kept` of its tokens (0: every
    one rejected): (time taken, plain's time for the same tokens, rounds that drafted), on
    the table's own costs."""
    spent = plain = 0.0
    drafting = 0
    one = CPU_PASSES[1]
    at = RoundContext()
    for _ in range(rounds):
        prices = policy.prices(at)
        assert prices is not None
        choice = policy.choose([offer], prices, at)
        k = 0 if choice.mode == PLAIN else choice.k
        rows = k + 1
        ms = prices[rows]
        accepted = int(k * kept)
        policy.observe(choice, batch=rows, verify_ms=ms, drafted=k, accepted=accepted, at=at)
        spent += ms
        plain += (accepted + 1) * one
        drafting += k > 0
    return spent, plain, drafting


def test_drafts_that_are_always_rejected_stop_and_cost_a_bounded_share() -> None:
    policy = _policy()
    first, plain_first, drafting_first = _run(policy, _confident(), 10, kept=0.0)
    # One failed long copy, and auto stopped (the old policy drafted every round) ...
    assert drafting_first == 1
    spent, plain, drafting = _run(policy, _confident(), 90, kept=0.0)
    spent, plain = spent + first, plain + plain_first
    # ... until the share of plain time written made up what it lost: one short draft at most
    # in the next ninety rounds.
    assert drafting <= 1
    # The loss is bounded: the seed and a few per cent of the plain time written, plus the
    # one round that found the estimate wrong.
    bound = REGRET_SEED * CPU_PASSES[1] + REGRET_SHARE * plain + _worst(63)
    assert spent - plain <= bound + 1e-6


def test_a_long_draft_that_may_fail_at_once_waits_until_the_answer_can_afford_it() -> None:
    # A copy that either breaks at its first token (six times in ten) or runs on.
    risky = _confident(alpha=0.99, first=0.4)
    prices = _policy().prices()
    assert prices is not None
    unbounded = _policy()
    unbounded.allowance.seed = 1e9
    longest = unbounded.choose([risky], prices).k
    choice = _policy().choose([risky], prices)
    # The old policy asked for the long copy at once; now it waits (or copies a little).
    assert longest > 8
    assert choice.mode == PLAIN or 0.6 * _worst(choice.k) <= REGRET_SEED * CPU_PASSES[1] + 1e-6
    # Once drafting has won that much in the answer, the long copy is affordable.
    policy = _policy()
    _run(policy, _confident(alpha=0.99), 6, kept=1.0)
    assert policy.choose([risky], prices).k == longest


def test_drafts_that_pay_earn_long_drafts() -> None:
    policy = _policy()
    spent, plain, _ = _run(policy, _confident(alpha=0.99), 12, kept=1.0)
    assert spent < plain / 1.5
    prices = policy.prices()
    assert prices is not None
    # As long as a policy with no bound at all would ask for.
    unbounded = _policy()
    unbounded.allowance.seed = 1e9
    best = unbounded.choose([_confident(alpha=0.99)], prices).k
    assert best > 16
    assert policy.choose([_confident(alpha=0.99)], prices).k == best


def test_a_one_off_cost_the_answer_cannot_afford_keeps_a_drafter_out() -> None:
    policy = _policy()
    prices = policy.prices()
    assert prices is not None
    cheap = 0.1 * CPU_PASSES[1]
    curve = [1.0 + min(k, 8) * 0.95 for k in range(17)]
    # A catch-up of forty tokens' time, all of it paid by this round if its draft fails.
    lagging = Offer(
        source="suffix", k_max=16, curve=curve, token_ms=cheap, extra_ms=40 * CPU_PASSES[1]
    )
    assert policy.choose([lagging], prices).mode == PLAIN
    assert "waits" in policy.choose([lagging], prices).reason


def test_the_draft_model_sizes_its_own_draft() -> None:
    # A probed drafter: its length is cut token by token by its own calibration, and what
    # its guesses cost is bounded by the probes' budget; the allowance leaves it be.
    policy = _policy()
    prices = policy.prices()
    assert prices is not None
    curve = [1.0 + sum(0.9**i for i in range(1, k + 1)) for k in range(17)]
    model = Offer(
        source="draft", k_max=16, curve=curve, token_ms=2.0, probed=True, sizes_itself=True
    )
    assert policy.choose([model], prices).k == 16
