"""Tests for the probability vector every decoding path shares."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from specchat.engine.sampling import (
    argmax_and_margin,
    greedy_pick,
    probabilities,
    sample,
    softmax,
    token_probability,
)
from specchat.engine.types import SamplingParams
from specchat.tinymodels import TinyModels

LOGITS = np.array([2.0, 1.0, 0.5, 0.0, -1.0, 3.0], dtype=np.float32)


def test_greedy_is_one_hot_at_argmax() -> None:
    p = probabilities(LOGITS, SamplingParams(temperature=0.0))
    assert p.tolist() == [0, 0, 0, 0, 0, 1]


def test_temperature_one_is_softmax() -> None:
    p = probabilities(LOGITS, SamplingParams(temperature=1.0))
    expected = np.exp(LOGITS - LOGITS.max()) / np.exp(LOGITS - LOGITS.max()).sum()
    np.testing.assert_allclose(p, expected, rtol=1e-6)
    assert p.sum() == pytest.approx(1.0)


def test_top_k_keeps_k_most_likely() -> None:
    p = probabilities(LOGITS, SamplingParams(temperature=1.0, top_k=2))
    assert set(np.flatnonzero(p)) == {0, 5}
    assert p.sum() == pytest.approx(1.0)


def test_top_p_keeps_smallest_set_reaching_mass() -> None:
    full = softmax(LOGITS)
    p = probabilities(LOGITS, SamplingParams(temperature=1.0, top_p=0.8))
    kept = set(np.flatnonzero(p))
    order = np.argsort(full)[::-1]
    cumulative = np.cumsum(full[order])
    need = int(np.searchsorted(cumulative, 0.8) + 1)
    assert kept == set(order[:need].tolist())


def _reference_top_p(logits: np.ndarray, top_p: float) -> set[int]:
    full = softmax(logits)
    order = np.argsort(full, kind="stable")[::-1]
    need = int(np.searchsorted(np.cumsum(full[order]), top_p) + 1)
    return set(order[:need].tolist())


@pytest.mark.parametrize(
    ("tail", "reached"),
    [
        # Tail tokens between 1e-6 and 1e-3 of the peak: the second candidate set holds them.
        (-10.0, "the second candidate set"),
        # Every tail token below 1e-6 of the peak (e^-14 ≈ 8e-7): no candidate set reaches
        # top_p, so only the full sort can find the nucleus.
        (-14.0, "the full sort"),
    ],
)
def test_top_p_finds_the_nucleus_beyond_the_likely_tokens(tail: float, reached: str) -> None:
    rng = np.random.default_rng(3)
    logits = (tail - rng.random(50_000)).astype(np.float32)  # distinct tail probabilities
    logits[0] = 0.0
    full = softmax(logits)
    assert full[0] < 0.99  # the peak alone is not the nucleus
    if reached == "the full sort":
        assert full[full >= 1e-6 * full[0]].sum() < 0.99  # nor is any candidate set
    p = probabilities(logits, SamplingParams(temperature=1.0, top_p=0.99))
    kept = set(np.flatnonzero(p).tolist())
    assert 1 < len(kept) < logits.shape[0], reached
    assert kept == _reference_top_p(logits, 0.99), reached
    assert p.sum() == pytest.approx(1.0)


def test_min_p_drops_unlikely_tokens() -> None:
    p = probabilities(LOGITS, SamplingParams(temperature=1.0, min_p=0.5))
    full = softmax(LOGITS)
    assert set(np.flatnonzero(p)) == set(np.flatnonzero(full >= 0.5 * full.max()))


def test_token_probability_matches_softmax() -> None:
    assert token_probability(LOGITS, 0) == pytest.approx(softmax(LOGITS)[0], rel=1e-6)


def test_argmax_and_margin() -> None:
    assert argmax_and_margin(LOGITS) == (5, pytest.approx(1.0))


def test_sample_follows_the_vector() -> None:
    rng = np.random.default_rng(0)
    p = np.array([0.1, 0.0, 0.6, 0.3])
    draws = np.bincount([sample(p, rng) for _ in range(20000)], minlength=4) / 20000
    assert draws[1] == 0
    np.testing.assert_allclose(draws, p, atol=0.015)


@pytest.mark.parametrize("size", [6, 1031, 151_936])
def test_greedy_pick_reads_a_row_as_argmax_margin_and_probability(size: int) -> None:
    """What greedy verification reads of a row (one fused sum where ggml's kernel is there):
    the same token and margin, the same probability to float precision, the row untouched."""
    rng = np.random.default_rng(size)
    row = (rng.standard_normal(size) * 4).astype(np.float32)
    row[::5] = -np.inf
    before = row.copy()
    token, margin, p = greedy_pick(row)
    assert (token, margin) == argmax_and_margin(row)
    assert p == pytest.approx(token_probability(row, token), rel=1e-6)
    np.testing.assert_array_equal(row, before)
    column = np.ascontiguousarray(np.stack([row, row])[:, :].T)[:, 0]  # not contiguous
    assert greedy_pick(column)[:2] == (token, margin)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")
def test_the_probability_kernel_is_the_cpu_library_llama_cpp_loaded(
    tiny_models: TinyModels,
) -> None:
    from specchat.engine import sampling
    from specchat.engine.llamacpp.model import LlamaModel

    with LlamaModel(tiny_models.target, n_ctx=256, n_threads=1):
        found = sampling._loaded_cpu_library()
        # The library llama.cpp runs on (a portable build's variant for this CPU), whose
        # kernels this CPU has; never one picked by name from the package's folder.
        assert found is not None and Path(found).name.startswith("libggml-cpu")
        assert sampling._exp_sum_kernel() is not None
