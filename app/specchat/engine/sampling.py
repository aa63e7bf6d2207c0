"""The one place logits become a probability vector: temperature, top-k, top-p, min-p."""

from __future__ import annotations

import numpy as np

from specchat.engine.types import SamplingParams

#: Relative probability thresholds tried for top-p candidates before a full sort: masking a
#: vocabulary and sorting the few survivors costs a small share of sorting it all, and a
#: sampled round pays it for every row (docs/costs.md, "Sampling's own time").
_TOP_P_THRESHOLDS = (1e-3, 1e-6)


def softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """Numerically stable softmax in float64."""
    scaled = logits.astype(np.float64) / max(temperature, 1e-6)
    scaled -= scaled.max()
    np.exp(scaled, out=scaled)
    scaled /= scaled.sum()
    return scaled


def token_probability(logits: np.ndarray, token: int) -> float:
    """softmax(logits)[token] at temperature 1 without building the whole vector in float64."""
    peak = logits.max()
    return float(np.exp(logits[token] - peak) / np.exp(logits - peak).sum(dtype=np.float64))


def argmax_and_margin(logits: np.ndarray) -> tuple[int, float]:
    """The top token and its logit lead over the runner-up (how close a tie it was)."""
    # Two linear scans (the top, then the rest with it masked) cost a small share of
    # argpartition's, and verification pays them for every row (docs/costs.md).
    first = int(np.argmax(logits))
    top = logits[first]
    logits[first] = -np.inf
    second = logits.max()
    logits[first] = top
    return first, float(top - second)


def probabilities(logits: np.ndarray, params: SamplingParams) -> np.ndarray:
    """The sampling distribution for one row of logits under `params`.

    Greedy settings give a one-hot vector at the argmax, so greedy and sampled decoding share
    one law: drafting, verification and plain decoding all draw from this vector.
    """
    if params.greedy:
        one_hot = np.zeros(logits.shape[0], dtype=np.float64)
        one_hot[int(np.argmax(logits))] = 1.0
        return one_hot
    probs = softmax(logits, params.temperature)
    if params.min_p > 0.0:
        probs[probs < params.min_p * probs.max()] = 0.0
    if 0 < params.top_k < probs.shape[0]:
        cutoff = np.partition(probs, -params.top_k)[-params.top_k]
        probs[probs < cutoff] = 0.0
    if params.top_p < 1.0:
        probs = _apply_top_p(probs, params.top_p)
    total = probs.sum()
    if total <= 0.0:  # every token filtered: fall back to the most likely one
        probs = np.zeros_like(probs)
        probs[int(np.argmax(logits))] = 1.0
        return probs
    normalised: np.ndarray = probs / total
    return normalised


def _apply_top_p(probs: np.ndarray, top_p: float) -> np.ndarray:
    """Keep the smallest set of most likely tokens whose mass reaches top_p."""
    total = probs.sum()
    peak = probs.max()
    order = None
    for relative in _TOP_P_THRESHOLDS:
        # Every token above the threshold outranks every token below it, so when the tokens
        # above already hold top_p of the mass the nucleus lies among them: sort just those.
        candidates = np.flatnonzero(probs >= peak * relative)
        if probs[candidates].sum() >= top_p * total:
            order = candidates[np.argsort(probs[candidates], kind="stable")[::-1]]
            break
    if order is None:
        order = np.argsort(probs, kind="stable")[::-1]
    cumulative = np.cumsum(probs[order]) / total
    keep = min(int(np.searchsorted(cumulative, top_p) + 1), order.shape[0])
    kept = np.zeros_like(probs)
    chosen = order[:keep]
    kept[chosen] = probs[chosen]
    return kept


def sample(probs: np.ndarray, rng: np.random.Generator) -> int:
    """Draw one token id from a probability vector (inverse CDF; exact for any vector)."""
    cumulative = np.cumsum(probs)
    u = rng.random() * cumulative[-1]
    index = int(np.searchsorted(cumulative, u, side="right"))
    last: int = probs.shape[0] - 1
    return min(index, last)
