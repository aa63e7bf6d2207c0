"""The draft model ends its draft where no longer draft's extra tokens are worth their extra
time at the rate rounds go at: far past its average K in a run of sure tokens, at once at a
doubted token where rows cost."""

from __future__ import annotations

import numpy as np
import pytest

from specchat.engine.costs.machine import MachineCosts
from specchat.engine.costs.table import CostTable, prior_shape
from specchat.engine.drafting import DraftModelDrafter, LoadedPair
from specchat.engine.drafting.base import Outcome
from specchat.engine.drafting.draft_model.draft_length import DraftLength, RoundRate
from specchat.engine.llamacpp.model import LlamaModel
from specchat.engine.types import SamplingParams

#: A GPU's passes: rows nearly free; a drafted token a fifth of a pass.
GPU = [0.0, *(6.4 + 0.5 * (n - 1) for n in range(1, 18))]
#: A 2-core CPU's: rows dear, a pass of 16 at five one-token passes.
CPU = [0.0, *(28.0 * prior_shape(n, gpu=False) for n in range(1, 18))]
#: Where nothing pays: n rows cost n one-token passes.
LINEAR = [0.0, *(28.0 * n for n in range(1, 18))]
#: A 2-core CPU's Q4_K_M target as measured (26 ms a token, 16 rows at 150 ms), where the
#: default 0.5B draft model's token costs 16 ms: drafting pays 1.07× at most (α = 1).
KM = [0.0, *np.interp(range(1, 18), [1, 2, 4, 8, 16, 32], [26, 49, 80, 129, 150, 264])]


def _drafted(
    prices: list[float],
    token_ms: float,
    rates: list[float],
    k: int = 16,
    continued: float = 0.8,
    achieved: float | None = None,
) -> int:
    """How many tokens go on the draft, each kept (after the ones before) at its rate, on a
    text whose tokens are kept at `continued`, where rounds made `achieved` tokens per ms."""
    length = DraftLength(prices, token_ms, continued=continued, achieved=achieved)
    for rate in rates:
        length.add(rate, rate)
        if not length.goes_on(k):
            break
    return length.drafted


def test_a_run_of_sure_tokens_is_drafted_to_the_longest_draft() -> None:
    assert _drafted(GPU, 1.4, [0.99] * 16) == 16
    assert _drafted(GPU, 1.4, [0.99] * 16, k=5) == 5


def test_a_doubted_token_ends_the_draft() -> None:
    assert _drafted(GPU, 1.4, [0.99, 0.99, 0.2, 0.99, 0.99]) == 3


def test_a_doubtful_token_is_worth_drafting_where_rounds_go_badly_not_where_they_go_well() -> None:
    """Going on is weighed against the rate rounds go at on this text, not the round's own
    rate so far: time a doubtful token costs is worth less where rounds make little."""
    assert _drafted(GPU, 1.4, [0.6] * 16, continued=0.5) == 2
    assert _drafted(GPU, 1.4, [0.6] * 16, continued=0.8) == 1


def test_where_drafting_barely_pays_rounds_that_fell_short_let_a_sure_draft_go_on() -> None:
    """At the curve's best rate a 0.99-sure token is not worth going on for where drafting
    pays 1.07× at most, and every draft stopped at its first token: two tokens in the time of
    three plain ones. Once rounds are timed short of that best, the draft is weighed against
    what they made (never below plain, which `auto` can fall back to) and goes on."""
    plain = 1.0 / KM[1]
    sure = [0.99] * 16
    assert _drafted(KM, 16.0, sure, continued=1.0) == 1
    assert _drafted(KM, 16.0, sure, continued=1.0, achieved=0.65 * plain) >= 15
    assert _drafted(KM, 16.0, sure, continued=1.0, achieved=0.0) >= 15
    # Rounds timed above the best at the text's rate weigh as that best.
    assert _drafted(KM, 16.0, sure, continued=1.0, achieved=3 * plain) == 1
    reference = DraftLength(KM, 16.0, continued=1.0, achieved=0.5 * plain).reference
    assert reference == pytest.approx(plain)


def test_the_rate_rounds_made_follows_the_recent_rounds() -> None:
    rate = RoundRate(decay=0.5)
    assert rate.rate is None
    rate.add(2, 80.0)
    assert rate.rate == pytest.approx(2 / 80)
    for _ in range(20):
        rate.add(16, 400.0)
    assert rate.rate == pytest.approx(16 / 400, rel=1e-3)


def test_where_rows_are_dear_only_a_sure_run_is_worth_going_on() -> None:
    assert _drafted(CPU, 11.6, [0.7] * 16) == 1
    assert _drafted(CPU, 11.6, [0.999] * 16) == 16


def test_the_rows_checked_are_the_best_prefix_of_what_was_drafted() -> None:
    length = DraftLength(GPU, 1.4, continued=0.8)
    for rate in (0.99, 0.99, 0.05):
        length.add(rate, rate)
    assert length.best_length() == 2  # the doubted third token is not worth its row
    nothing = DraftLength(LINEAR, 1.4, continued=0.8)
    nothing.add(0.9, 0.9)
    assert not nothing.goes_on(16)
    assert nothing.best_length() == 0  # where a row costs a pass, no draft is worth one


def test_a_sampled_draft_is_never_cut_back_by_the_confidence_of_later_tokens(
    tiny_draft: LlamaModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At T = 0 the rows checked are cut to the best prefix; when sampling they are not: the
    best prefix weighs later tokens' confidence, which depends on the tokens sampled before
    them, and a token checked or not by which token was sampled would bend the output away
    from the target's distribution."""
    costs = MachineCosts(CostTable(gpu=True))
    costs.seed({n: 10.0 + 0.1 * (n - 1) for n in range(1, 65)}, draft_token_ms=1.0)
    drafter = DraftModelDrafter.create(LoadedPair(draft=tiny_draft, costs=costs), {})
    assert isinstance(drafter, DraftModelDrafter)
    monkeypatch.setattr(DraftLength, "best_length", lambda self: 0)
    tiny_draft.reset()
    context = tiny_draft.tokenize("the cat sat on the mat and", add_special=False)
    rng = np.random.default_rng(0)
    assert drafter.propose(context, 4, SamplingParams(), rng).tokens == ()
    sampled = drafter.propose(context, 4, SamplingParams(temperature=0.8, seed=1), rng)
    assert sampled.tokens and sampled.probs is not None
    assert len(sampled.probs) == len(sampled.tokens) == len(sampled.confidences)


def test_the_draft_model_learns_the_rate_of_its_rounds_from_their_time_and_the_check_price(
    tiny_draft: LlamaModel,
) -> None:
    """Each round it sizes by prices is timed: its drafting as measured, the target's check
    at the price it was sized by, and the tokens the round wrote; that rate weighs the next
    draft's length."""
    costs = MachineCosts(CostTable(gpu=True))
    costs.seed({n: 10.0 + 0.1 * (n - 1) for n in range(1, 65)}, draft_token_ms=1.0)
    drafter = DraftModelDrafter.create(LoadedPair(draft=tiny_draft, costs=costs), {})
    assert isinstance(drafter, DraftModelDrafter)
    tiny_draft.reset()
    context = tiny_draft.tokenize("the cat sat on the mat and", add_special=False)
    draft = drafter.propose(context, 4, SamplingParams(), np.random.default_rng(0))
    assert draft.tokens
    assert draft.check_ms == pytest.approx(10.0 + 0.1 * len(draft.tokens))
    assert drafter.rounds.rate is None
    drafter.observe(Outcome([*context, draft.tokens[0], 5], draft, 1))
    assert drafter.rounds.rate == pytest.approx(2 / (draft.ms - draft.catchup_ms + draft.check_ms))
