"""The draft model ends its draft where no longer draft's extra tokens are worth their extra
time at the rate rounds go at: far past its average K in a run of sure tokens, at once at a
doubted token where rows cost."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from specchat.engine.costs.machine import MachineCosts
from specchat.engine.costs.table import CostTable, prior_shape
from specchat.engine.drafting import DraftModelDrafter, LoadedPair
from specchat.engine.drafting.base import Draft, Outcome, expected_tokens
from specchat.engine.drafting.draft_model.draft_length import DraftLength, RoundRate
from specchat.engine.drafting.stored_estimates import StoredEstimates
from specchat.engine.llamacpp.model import LlamaModel
from specchat.engine.types import PolicyChoice, RoundResult, SamplingParams, Stats, StopReason

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


def _priced_drafter(tiny_draft: LlamaModel) -> tuple[DraftModelDrafter, list[int]]:
    """The tiny draft model as a drafter on a GPU's prices (a pass of n rows 10 + 0.1 (n - 1)
    ms, a drafted token 1 ms), its cache empty, and a context to draft after."""
    costs = MachineCosts(CostTable(gpu=True))
    costs.seed({n: 10.0 + 0.1 * (n - 1) for n in range(1, 65)}, draft_token_ms=1.0)
    drafter = DraftModelDrafter.create(LoadedPair(draft=tiny_draft, costs=costs), {})
    assert isinstance(drafter, DraftModelDrafter)
    tiny_draft.reset()
    return drafter, tiny_draft.tokenize("the cat sat on the mat and", add_special=False)


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
    drafter, context = _priced_drafter(tiny_draft)
    draft = drafter.propose(context, 4, SamplingParams(), np.random.default_rng(0))
    assert draft.tokens
    assert draft.check_ms == pytest.approx(10.0 + 0.1 * len(draft.tokens))
    assert drafter.rounds.rate is None
    drafter.observe(Outcome([*context, draft.tokens[0], 5], draft, 1))
    assert drafter.rounds.rate == pytest.approx(2 / (draft.ms - draft.catchup_ms + draft.check_ms))


def test_what_rounds_made_weighs_less_after_rounds_of_others_and_keeps_its_rate() -> None:
    rate = RoundRate(decay=0.5)
    rate.add(4, 40.0)
    rate.add(2, 40.0)
    assert rate.weight == pytest.approx(1.5)
    before = rate.rate
    rate.age()
    assert rate.rate == pytest.approx(before) and rate.weight == pytest.approx(0.75)


def _sized_round(drafter: DraftModelDrafter, context: list[int], asked: int, ms: float) -> None:
    """A round of the draft model that drafted one token and kept it, in `ms` all told."""
    from specchat.engine.drafting.draft_model.draft_model_drafter import ModelDraft

    # Drafted in 1 ms (the seeded price), the rest the target's check.
    draft = ModelDraft((7,), None, 1.0, drafter.name, decodes=1, check_ms=ms - 1.0, asked=asked)
    drafter.observe(Outcome([*context, 7, 5], draft, 1))


def test_the_draft_models_offer_is_held_to_what_its_sized_rounds_made(
    tiny_draft: LlamaModel,
) -> None:
    """Its curve prices every K as if each draft ran to it; where its rounds stop short and
    make less than that promise, the offer is scaled down to the rate they made (the promise
    counting as two rounds), never up; probes (K = 1) say nothing of a sized draft; rounds of
    other drafters age what its rounds said, and the promise returns."""
    drafter, context = _priced_drafter(tiny_draft)
    prices = [0.0, *(10.0 + 0.1 * (n - 1) for n in range(1, 20))]

    def promise() -> list[float]:  # the curve of its acceptance as it stands
        found = drafter._acceptance
        return [expected_tokens(found.alpha, k, found.continued) for k in range(17)]

    first = drafter.offer(context, 16, prices)
    assert first is not None and first.curve == promise() and "its rounds" not in first.detail

    for _ in range(3):  # probes, however slow, leave the offer as its acceptance has it
        _sized_round(drafter, context, asked=1, ms=200.0)
    probed = drafter.offer(context, 16, prices)
    assert probed is not None and probed.curve == promise() and "its rounds" not in probed.detail

    for _ in range(20):  # sized rounds that made 2 tokens in 40 ms: half plain's rate
        _sized_round(drafter, context, asked=16, ms=40.0)
    held = drafter.offer(context, 16, prices)
    assert held is not None and "its rounds ≈ 0.50× plain" in held.detail
    promised = promise()
    assert held.curve[0] == promised[0] == 1.0
    scale = held.curve[5] / promised[5]
    assert all(
        h == pytest.approx(p * scale) for h, p in zip(held.curve[1:], promised[1:], strict=True)
    )
    # Ten rounds' worth of evidence (decay 0.9) against the promise's two.
    best = max(
        promised[k] / (prices[k + 1] + held.token_ms * k + held.round_ms) for k in range(1, 17)
    )
    weight = drafter.sized.weight
    assert weight == pytest.approx(10.0, rel=0.15)
    assert scale == pytest.approx((weight * 2 / 40.0 + 2.0 * best) / (weight + 2.0) / best)
    assert scale < 0.8

    for _ in range(60):  # plain rounds: the text moves on
        drafter.observe(Outcome([*context, 5], Draft((), None, 0.0, "plain"), 0))
    back = drafter.offer(context, 16, prices)
    assert back is not None and back.curve[5] / promise()[5] > 0.97


def test_what_its_sized_rounds_made_starts_the_next_load_of_the_pair(
    tiny_draft: LlamaModel, tmp_path: Path
) -> None:
    """A fresh window or server holds the offer where the last session's rounds left it,
    through the stored estimates (the cost table's rules: only an answer that ended)."""
    drafter, context = _priced_drafter(tiny_draft)
    prices = [0.0, *(10.0 + 0.1 * (n - 1) for n in range(1, 20))]
    path, key = tmp_path / "estimates.json", {"pair": "tiny"}
    session = StoredEstimates(path, key, other_cpu=lambda: 0.0)
    session.start(drafter)

    def an_answer() -> Iterator[RoundResult]:
        for _ in range(20):  # sized rounds at half plain's rate, as above
            _sized_round(drafter, context, asked=16, ms=40.0)
        yield _last_round()

    list(session.watching(an_answer()))
    held = drafter.offer(context, 16, prices)
    assert held is not None and "its rounds ≈ 0.50× plain" in held.detail
    assert session.save()

    fresh, _ = _priced_drafter(tiny_draft)
    StoredEstimates(path, key, other_cpu=lambda: 0.0).start(fresh)
    resumed = fresh.offer(context, 16, prices)
    assert resumed is not None and resumed.detail == held.detail
    assert resumed.curve == pytest.approx(held.curve)
    assert fresh.rounds.rate == pytest.approx(drafter.rounds.rate)
    with pytest.raises(ValueError):
        fresh.sized.resume({**drafter.sized.learnt(), "ms": -1.0})


def _last_round() -> RoundResult:
    """An answer's last round, ended normally (what the stored estimates wait for)."""
    return RoundResult(
        index=0,
        events=(),
        rejected=(),
        rejected_text="",
        drafted=0,
        accepted=0,
        draft_ms=0.0,
        verify_ms=1.0,
        choice=PolicyChoice("plain", 0, "test"),
        temperature=0.0,
        stats=Stats(),
        text="",
        stop=StopReason.EOS,
    )
