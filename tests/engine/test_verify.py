"""Tests for exact verification: greedy prefix and rejection sampling's output law."""

from __future__ import annotations

import numpy as np
import pytest

from specchat.engine.decoding.verify import verify
from specchat.engine.sampling import probabilities
from specchat.engine.types import SamplingParams

GREEDY = SamplingParams(temperature=0.0)
SAMPLED = SamplingParams(temperature=1.0)


def rows(*argmaxes: int, vocab: int = 6) -> np.ndarray:
    logits = np.zeros((len(argmaxes), vocab), dtype=np.float32)
    for i, top in enumerate(argmaxes):
        logits[i, top] = 5.0
    return logits


def test_greedy_keeps_matching_prefix_and_corrects_first_miss() -> None:
    verdict = verify([1, 2, 3], None, rows(1, 2, 4, 0), GREEDY, np.random.default_rng(0))
    assert verdict.n_accepted == 2
    assert verdict.next_token == 4
    assert verdict.p_draft[-1] == 0.0  # the deterministic drafter never proposed 4


def test_greedy_all_kept_adds_bonus() -> None:
    verdict = verify([1, 2], None, rows(1, 2, 5), GREEDY, np.random.default_rng(0))
    assert (verdict.n_accepted, verdict.next_token) == (2, 5)
    assert verdict.p_draft[-1] is None
    assert len(verdict.margins) == 3


def test_no_drafts_is_one_plain_step() -> None:
    verdict = verify([], None, rows(3), GREEDY, np.random.default_rng(0))
    assert (verdict.n_accepted, verdict.next_token) == (0, 3)


def test_row_count_is_checked() -> None:
    with pytest.raises(ValueError):
        verify([1], None, rows(1), GREEDY, np.random.default_rng(0))


def _first_token_law(p_logits: np.ndarray, q: np.ndarray | None, draws: int) -> np.ndarray:
    """Empirical law of the first emitted token over many one-draft verifications."""
    rng = np.random.default_rng(1234)
    counts = np.zeros(p_logits.shape[1])
    for _ in range(draws):
        if q is None:
            draft = 2  # deterministic drafter, always proposes token 2
            probs = None
        else:
            draft = int(rng.choice(len(q), p=q))
            probs = [q]
        verdict = verify([draft], probs, p_logits, SAMPLED, rng)
        counts[draft if verdict.n_accepted else verdict.next_token] += 1
    return counts / draws


@pytest.mark.parametrize("deterministic", [False, True])
def test_rejection_sampling_reproduces_target_law(deterministic: bool) -> None:
    logits = np.log(np.array([[0.1, 0.2, 0.3, 0.4], [0.25, 0.25, 0.25, 0.25]], dtype=np.float32))
    p = probabilities(logits[0], SAMPLED)
    q = None if deterministic else np.array([0.7, 0.1, 0.1, 0.1])
    law = _first_token_law(logits, q, 40000)
    # A verifier that resampled from p (not the residual) after a rejection would give
    # token 0 about 0.16 here instead of 0.1: far outside this tolerance.
    np.testing.assert_allclose(law, p, atol=0.012)
