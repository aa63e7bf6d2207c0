"""Speculative sampling has exactly plain sampling's law: two-sample chi-square tests.

The draft is a perturbed target, so p and q overlap and differ: rejections are common and the
residual step, normalize(max(0, p − q)), carries the law. The two arms use disjoint seeds, so
they are independent samples. Answers run for several rounds of K = 3 drafts, so rejections
at the second and third drafted position (deeper residuals) are part of what is tested, and
the sampling filters (top-k, top-p, min-p) shape both p and q.

Resampling from p instead of the residual fails these tests: with verify.py mutated to
`residual = p`, the first two tokens' chi-square is 163 (T = 0.8) and 255 (filters) against
thresholds of 38 and 34; the correct code gives 4 and 8.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest

from specchat.engine.decoding.decoder import SpeculativeDecoder
from specchat.engine.drafting.base import LoadedPair
from specchat.engine.llamacpp.model import LlamaModel
from specchat.engine.types import SamplingParams, TokenKind
from specchat.tinymodels import TinyModels
from tests.helpers.engine import Run, run

K = 3
#: Tokens per answer: K + 1 in the first round, then more rounds.
ANSWER = 6
DRAWS = 2000
#: Seeds of the speculative arm start here; the plain arm uses 0 .. DRAWS - 1.
SPEC_SEEDS = 1_000_000

SETTINGS = {
    "t0.8": SamplingParams(temperature=0.8),
    "filters": SamplingParams(temperature=1.1, top_k=40, top_p=0.9, min_p=0.02),
}


@pytest.fixture(scope="module")
def decoder(tiny_models: TinyModels) -> Iterator[SpeculativeDecoder]:
    with (
        LlamaModel(tiny_models.target, n_ctx=256, n_threads=1) as target,
        LlamaModel(tiny_models.draft_close, n_ctx=256, n_threads=1) as draft,
    ):
        yield SpeculativeDecoder(LoadedPair.of(target, draft))


def _chi2_quantile_9999(df: int) -> float:
    """Wilson–Hilferty approximation of the chi-square 0.9999 quantile (z = 3.719)."""
    z = 3.719
    return df * (1 - 2 / (9 * df) + z * (2 / (9 * df)) ** 0.5) ** 3


def chi_square(a: Counter, b: Counter) -> tuple[float, float, int]:
    """Two-sample chi-square of equal-size samples: (statistic, 0.9999 threshold, bins).

    Outcomes too rare for the approximation are pooled into one bin.
    """
    n = sum(a.values())
    assert n == sum(b.values())
    common = [key for key in a.keys() | b.keys() if a[key] + b[key] >= 20]
    bins = [(a[key], b[key]) for key in common]
    rest = (n - sum(x for x, _ in bins), n - sum(y for _, y in bins))
    if sum(rest) > 0:
        bins.append(rest)
    statistic = sum((x - y) ** 2 / (x + y) for x, y in bins if x + y)
    return statistic, _chi2_quantile_9999(max(1, len(bins) - 1)), len(bins)


def _answers(
    decoder: SpeculativeDecoder, prompt: list[int], mode: str, sampling: SamplingParams
) -> list[Run]:
    first = 0 if mode == "plain" else SPEC_SEEDS
    out = []
    for seed in range(first, first + DRAWS):
        params = SamplingParams(
            temperature=sampling.temperature,
            top_k=sampling.top_k,
            top_p=sampling.top_p,
            min_p=sampling.min_p,
            seed=seed,
        )
        out.append(run(decoder, prompt, mode=mode, k=K, max_tokens=ANSWER, sampling=params))
    return out


def _padded(answer: Run) -> tuple[int, ...]:
    # An answer that ended early (end of text) reads -1 after its end: stopping is part
    # of the law too, and both samples keep their size.
    return (*answer.tokens, *([-1] * (ANSWER - len(answer.tokens))))


@pytest.mark.parametrize("setting", SETTINGS)
def test_speculative_sampling_has_the_plain_law(decoder: SpeculativeDecoder, setting: str) -> None:
    sampling = SETTINGS[setting]
    prompt = decoder.target.tokenize("the cat sat")
    plain = _answers(decoder, prompt, "plain", sampling)
    spec = _answers(decoder, prompt, "draft", sampling)

    # The test means something only if K drafts were made and rejected at every depth.
    full_rounds = sum(r.drafted == K for answer in spec for r in answer.rounds)
    assert full_rounds >= DRAWS, f"only {full_rounds} rounds drafted K={K} tokens"
    rejected_at = Counter(
        sum(e.kind == TokenKind.ACCEPTED for e in r.events)
        for answer in spec
        for r in answer.rounds
        if r.drafted == K and any(e.kind == TokenKind.CORRECTED for e in r.events)
    )
    assert all(rejected_at[depth] >= 50 for depth in range(K)), rejected_at

    # Each position's law, and the joint law of the first two tokens.
    lines = []
    tests = [("tokens 1-2", lambda a: _padded(a)[:2])]
    tests += [(f"token {i + 1}", lambda a, i=i: _padded(a)[i]) for i in range(ANSWER)]
    for name, outcome in tests:
        statistic, threshold, bins = chi_square(
            Counter(outcome(a) for a in plain), Counter(outcome(a) for a in spec)
        )
        lines.append(f"{name}: chi-square {statistic:.1f} < {threshold:.1f} ({bins} bins)")
        assert bins >= 5, f"{name}: too few outcomes for a meaningful test"
        assert statistic < threshold, "\n".join(lines)
    print(f"\n{setting}: " + "; ".join(lines))
