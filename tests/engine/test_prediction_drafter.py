"""The prediction drafter: copies from a request's prediction, exact at T = 0, and a
prediction the answer does not follow costs next to nothing under auto."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest

from specchat.engine.decoding.decoder import SpeculativeDecoder
from specchat.engine.drafting.base import LoadedPair
from specchat.engine.drafting.prediction.prediction_drafter import (
    ANCHOR_FIRST,
    PredictionDrafter,
    locate_in,
)
from specchat.engine.llamacpp.model import LlamaModel
from specchat.engine.types import Controls, GenerationRequest, RoundResult, SamplingParams
from specchat.tinymodels import TinyModels
from tests.engine.test_sampling_law import chi_square
from tests.helpers.engine import CHAT_PROMPTS
from tests.helpers.policy_choices import CPU, TABLES, PinnedCosts, pin

#: Answers sampled in each arm of the law test.
DRAWS = 800


def _answer(
    decoder: SpeculativeDecoder,
    prompt: list[int],
    *,
    mode: str,
    prediction: tuple[int, ...] = (),
    max_tokens: int = 80,
    sampling: SamplingParams = SamplingParams(),
) -> list[RoundResult]:
    request = GenerationRequest(
        tuple(prompt), max_tokens, Controls(mode, 6, sampling), prediction=prediction
    )
    return list(decoder.generate(request))


def _tokens(rounds: list[RoundResult]) -> list[int]:
    return [e.token for r in rounds for e in r.events]


def _from_prediction(rounds: list[RoundResult]) -> tuple[int, int]:
    """(drafted, kept) of the rounds the prediction drafted."""
    mine = [r for r in rounds if r.choice.mode == PredictionDrafter.name]
    return sum(r.drafted for r in mine), sum(r.accepted for r in mine)


def _pinned(decoder: SpeculativeDecoder, costs: PinnedCosts) -> SpeculativeDecoder:
    """A fresh decoder on the same models (nothing said yet), pricing from `costs` rather
    than from timings taken on a busy machine."""
    fresh = SpeculativeDecoder(LoadedPair.of(decoder.target, decoder.draft))
    pin(SimpleNamespace(decoder=fresh), costs)  # type: ignore[arg-type]
    return fresh


def test_locate_in_finds_the_longest_agreement() -> None:
    document = np.asarray([5, 1, 2, 3, 9, 7, 2, 3, 4, 8], dtype=np.int64)
    assert locate_in(document, [0, 1, 2, 3], 64) == (4, 3)  # "1 2 3" then 9
    assert locate_in(document, [7, 2, 3], 64) == (8, 3)  # "7 2 3" then 4
    assert locate_in(document, [6, 6], 64) == (-1, 0)
    assert locate_in(document, [8], 64) == (-1, 0)  # nothing follows the last token


def test_locate_in_narrows_many_candidates() -> None:
    document = np.asarray([1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 1, 1, 3], dtype=np.int64)
    start, longest = locate_in(document, [2, 1, 1], 64)
    assert (start, longest) == (13, 3)


@pytest.fixture(scope="module")
def decoder(tiny_models: TinyModels):  # type: ignore[no-untyped-def]
    with (
        LlamaModel(tiny_models.target, n_ctx=1024, n_threads=1) as target,
        LlamaModel(tiny_models.draft_close, n_ctx=1024, n_threads=1) as draft,
    ):
        yield SpeculativeDecoder(LoadedPair.of(target, draft))


def test_greedy_output_is_plain_with_any_prediction(decoder: SpeculativeDecoder) -> None:
    target = decoder.target
    for text in CHAT_PROMPTS:
        prompt = target.tokenize(text)
        plain = _tokens(_answer(decoder, prompt, mode="plain"))
        right = tuple(plain)
        garbage = tuple(int(t) for t in np.random.default_rng(3).integers(3, 250, 300))
        half = right[: len(right) // 2] + garbage[:20] + right[len(right) // 2 :]
        for prediction in (right, garbage, half, ()):
            for mode in ("prediction", "auto"):
                rounds = _answer(decoder, prompt, mode=mode, prediction=prediction)
                assert _tokens(rounds) == plain, (text, mode, len(prediction))
        drafted, kept = _from_prediction(
            _answer(decoder, prompt, mode="prediction", prediction=right)
        )
        assert kept >= len(plain) // 2 and drafted > 0


def test_a_right_prediction_is_copied_under_auto(decoder: SpeculativeDecoder) -> None:
    prompt = decoder.target.tokenize(CHAT_PROMPTS[0])
    plain = _tokens(_answer(decoder, prompt, mode="plain", max_tokens=120))
    # A decoder that has not seen the answer: the suffix index would copy it too.
    fresh = _pinned(decoder, CPU)
    rounds = _answer(fresh, prompt, mode="auto", prediction=tuple(plain), max_tokens=120)
    _, kept = _from_prediction(rounds)
    assert kept >= 80
    assert len(rounds) < 60  # far fewer target passes than tokens
    # The answer follows the prediction from its first token: copied from the first round
    # that may draft (the very first measures the target's cost).
    first = next(r.index for r in rounds if r.choice.mode == "prediction")
    assert first <= 1
    assert {e.origin for r in rounds for e in r.events if e.origin} <= {"a prediction"}


@pytest.mark.parametrize("costs", TABLES, ids=lambda c: c.name)
def test_a_garbage_prediction_costs_next_to_nothing_under_auto(
    decoder: SpeculativeDecoder, costs: PinnedCosts
) -> None:
    prompt = decoder.target.tokenize(CHAT_PROMPTS[1])
    garbage = tuple(int(t) for t in np.random.default_rng(5).integers(3, 250, 2000))
    fresh = SpeculativeDecoder(LoadedPair.of(decoder.target, decoder.draft))
    pinned = _answer(fresh, prompt, mode="prediction", prediction=garbage, max_tokens=200)
    assert _from_prediction(pinned)[0] > 500  # the copies it offers are wrong
    fresh = _pinned(decoder, costs)
    rounds = _answer(fresh, prompt, mode="auto", prediction=garbage, max_tokens=200)
    drafted, kept = _from_prediction(rounds)
    # Auto learns from every position that the copies fail: it checks few of them (a tenth
    # of a row per answer token at most, where a pinned copy checked five).
    assert drafted - kept <= 20 + 4
    anchored = [r for r in rounds if "start of the prediction" in r.choice.reason]
    assert len(anchored) <= 1  # the guess at the prediction's start: once, and short
    assert all(r.drafted <= ANCHOR_FIRST + 1 for r in anchored)


def test_sampled_output_keeps_the_plain_law(decoder: SpeculativeDecoder) -> None:
    """Drafting from a prediction leaves sampling's law alone: the first two tokens of
    answers with and without it agree (two-sample chi-square, independent seeds)."""
    prompt = decoder.target.tokenize(CHAT_PROMPTS[2])
    prediction = tuple(_tokens(_answer(decoder, prompt, mode="plain", max_tokens=40)))
    counts: dict[str, Counter[tuple[int, ...]]] = {"plain": Counter(), "prediction": Counter()}
    kept = 0
    for arm, first in (("plain", 0), ("prediction", 1_000_000)):
        for seed in range(first, first + DRAWS):
            rounds = _answer(
                decoder,
                prompt,
                mode=arm,
                prediction=prediction,
                sampling=SamplingParams(temperature=0.8, seed=seed),
                max_tokens=4,
            )
            counts[arm][tuple(_tokens(rounds)[:2])] += 1
            kept += _from_prediction(rounds)[1]
    statistic, threshold, _ = chi_square(counts["plain"], counts["prediction"])
    assert statistic < threshold
    assert kept > DRAWS // 2  # the prediction was drafted from and often kept
