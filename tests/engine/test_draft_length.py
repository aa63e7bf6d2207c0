"""The draft model ends its draft where no longer draft's extra tokens are worth their extra
time at the rate rounds go at: far past its average K in a run of sure tokens, at once at a
doubted token where rows cost."""

from __future__ import annotations

import numpy as np
import pytest

from specchat.engine.costs.machine import MachineCosts
from specchat.engine.costs.table import CostTable, prior_shape
from specchat.engine.drafting import DraftModelDrafter, LoadedPair
from specchat.engine.drafting.draft_model.draft_length import DraftLength
from specchat.engine.llamacpp.model import LlamaModel
from specchat.engine.types import SamplingParams

#: A GPU's passes: rows nearly free; a drafted token a fifth of a pass.
GPU = [0.0, *(6.4 + 0.5 * (n - 1) for n in range(1, 18))]
#: A 2-core CPU's: rows dear, a pass of 16 at five one-token passes.
CPU = [0.0, *(28.0 * prior_shape(n, gpu=False) for n in range(1, 18))]
#: Where nothing pays: n rows cost n one-token passes.
LINEAR = [0.0, *(28.0 * n for n in range(1, 18))]


def _drafted(
    prices: list[float], token_ms: float, rates: list[float], k: int = 16, continued: float = 0.8
) -> int:
    """How many tokens go on the draft, each kept (after the ones before) at its rate, on a
    text whose tokens are kept at `continued`."""
    length = DraftLength(prices, token_ms, continued=continued)
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
