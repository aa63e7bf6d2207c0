"""AutoPolicy probes only drafters that could pay, and backs off probes that change nothing."""

from __future__ import annotations

import pytest

from specchat.engine.schedule import AutoPolicy
from specchat.engine.types import DraftMode, PolicyChoice
from specchat.tinymodels import TinyModels

PLAIN = PolicyChoice(DraftMode.PLAIN, 0, "")


def _policy(batch_ms: dict[int, float], draft_token_ms: float | None) -> AutoPolicy:
    policy = AutoPolicy(probe_interval=4)
    policy.costs.batch_ms.update(batch_ms)
    policy.costs.draft_token_ms = draft_token_ms
    return policy


def _choose(policy: AutoPolicy, *, lookup_len: int = 0) -> PolicyChoice:
    return policy.choose(
        DraftMode.AUTO, 16, lookup_len=lookup_len, match_len=4 if lookup_len else 0,
        has_draft=True,
    )  # fmt: skip


def _plain_rounds(policy: AutoPolicy, n: int) -> None:
    for _ in range(n):
        policy.observe(PLAIN, batch=1, verify_ms=policy.costs.batch_ms[1], draft_ms=0.0,
                       drafted=0, accepted=0, match_len=0)  # fmt: skip


def test_a_drafter_that_loses_even_at_perfect_acceptance_is_never_probed() -> None:
    # A batch of n costs n single tokens: no K pays, whatever the acceptance.
    linear = {n: 10.0 * n for n in range(1, 18)}
    policy = _policy(linear, draft_token_ms=3.0)
    assert not policy.could_pay(DraftMode.DRAFT)
    assert not policy.could_pay(DraftMode.LOOKUP)
    _plain_rounds(policy, 40)
    assert all(_choose(policy, lookup_len=8).mode == DraftMode.PLAIN for _ in range(5))


def test_a_drafter_that_could_pay_is_still_probed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("specchat.engine.schedule.PROBE_BUDGET", 1.0)
    # GPU-like: extra rows are nearly free.
    cheap = {n: 10.0 + 0.1 * (n - 1) for n in range(1, 18)}
    policy = _policy(cheap, draft_token_ms=1.0)
    policy.draft_acceptance.first_kept, policy.draft_acceptance.first_trials = 0.0, 50.0
    assert policy.could_pay(DraftMode.DRAFT)
    _plain_rounds(policy, 5)
    choice = _choose(policy)
    assert (choice.mode, choice.k) == (DraftMode.DRAFT, 1) and "probing" in choice.reason


def test_a_kept_probe_that_leaves_plain_ahead_backs_off(monkeypatch: pytest.MonkeyPatch) -> None:
    # Costs where the draft pays only near α = 1; the estimate stays far below that. (The
    # budget is lifted so that a probe is made at all after four rounds.)
    monkeypatch.setattr("specchat.engine.schedule.PROBE_BUDGET", 1.0)
    costs = {1: 10.0, 2: 11.0, 3: 12.0, 4: 13.0, 5: 14.0}
    policy = _policy(costs, draft_token_ms=4.0)
    policy.draft_acceptance.first_kept, policy.draft_acceptance.first_trials = 1.0, 20.0
    _plain_rounds(policy, 5)
    probe = _choose(policy)
    assert probe.mode == DraftMode.DRAFT
    policy.observe(probe, batch=2, verify_ms=11.0, draft_ms=4.0, drafted=1, accepted=1,
                   match_len=0)  # fmt: skip
    # The next probe waits twice as long as the first did (8 plain rounds, not 4).
    gap = 0
    while (choice := _choose(policy)).mode != DraftMode.DRAFT:
        policy.observe(choice, batch=1, verify_ms=10.0, draft_ms=0.0, drafted=0, accepted=0,
                       match_len=0)  # fmt: skip
        gap += 1
        assert gap < 100, "never probed again"
    print(f"next probe after {gap} plain rounds")
    assert gap >= 8


def test_copied_runs_value_long_drafts() -> None:
    """Acceptance that continues in runs makes a long lookup draft worth more than i.i.d."""
    from specchat.engine.schedule import _Acceptance, expected_tokens

    runs = _Acceptance.prior(0.5, 0.5, weight=1.0)
    for _ in range(60):  # half the drafts fail at once; the rest copy all 8 tokens
        runs.update(8, 0)
        runs.update(8, 8)
    assert runs.alpha == pytest.approx(0.5, abs=0.05)
    assert runs.continued > 0.95
    assert runs.expected(8) > expected_tokens(0.5, 8) + 2.5


def test_calibration_seeds_the_cost_model(tiny_models: TinyModels) -> None:
    from specchat.engine.decoder import SpeculativeDecoder
    from specchat.engine.llama import LlamaModel

    with (
        LlamaModel(tiny_models.target, n_ctx=256) as target,
        LlamaModel(tiny_models.draft_close, n_ctx=256) as draft,
    ):
        target.decode([5, 6, 7], logits="none")
        decoder = SpeculativeDecoder(target, draft)
        decoder.calibrate(8)
        assert target.tokens == [5, 6, 7] and draft.tokens == []
        assert decoder.auto.calibrated
        assert set(decoder.auto.costs.batch_ms) == {1, 2, 4, 8, 16, 32}
        assert decoder.auto.costs.draft_token_ms is not None


def test_a_stall_does_not_poison_the_cost_model() -> None:
    policy = AutoPolicy()
    policy.costs.seed({1: 3000.0, 2: 90.0, 4: 140.0}, draft_token_ms=None)
    # A stalled single-token calibration cannot make plain look slower than a batch of two...
    assert policy.costs.target_ms(1) == 90.0
    assert policy.costs.target_ms(4) == 140.0
    fresh = AutoPolicy()
    fresh.costs.seed({1: 50.0, 2: 90.0}, draft_token_ms=None)
    for _ in range(3):  # ...and one stalled round moves an estimate by a bounded step.
        fresh.costs.observe_batch(1, 5000.0)
    assert fresh.costs.target_ms(1) < 50.0 * 3


def test_a_long_idle_draft_model_is_not_probed_where_catching_up_is_dear() -> None:
    # CPU-like costs where the draft could pay at α = 1, but a 300-token catch-up costs far
    # more than the probing budget allows.
    costs = {1: 40.0, 2: 44.0, 3: 48.0, 4: 52.0, 5: 56.0, 17: 100.0}
    policy = _policy(costs, draft_token_ms=4.0)
    policy.costs.catchup_token_ms = 5.0
    _plain_rounds(policy, 40)
    choice = policy.choose(DraftMode.AUTO, 16, lookup_len=0, match_len=0, has_draft=True,
                           draft_lag=300)  # fmt: skip
    assert choice.mode == DraftMode.PLAIN
    near = policy.choose(DraftMode.AUTO, 16, lookup_len=0, match_len=0, has_draft=True,
                         draft_lag=2)  # fmt: skip
    assert near.mode == DraftMode.DRAFT
