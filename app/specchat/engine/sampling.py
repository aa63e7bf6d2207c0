"""The one place logits become a probability vector: temperature, top-k, top-p, min-p."""

from __future__ import annotations

import ctypes
import functools
import threading
from collections.abc import Callable
from pathlib import Path

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
    return _probability(logits, token, logits.max())


def greedy_pick(logits: np.ndarray) -> tuple[int, float, float]:
    """The top token, its logit lead over the runner-up, and its probability at temperature
    1: what greedy verification reads of a row, every plain token included.

    The probability is 1 / Σ exp(l − top), summed in one pass by ggml's own softmax kernel
    where the process has it (a third of numpy's three passes over a 151k-token row, and the
    largest share of a plain round's own time); it agrees with token_probability to about
    1e-8, and only shows (greedy output never reads it).
    """
    first, margin = argmax_and_margin(logits)
    peak = logits[first]
    kernel = _exp_sum_kernel()
    if kernel is not None and logits.dtype == np.float32 and logits.flags.c_contiguous:
        return first, margin, 1.0 / kernel(logits, float(peak))
    return first, margin, _probability(logits, first, peak)


def _probability(logits: np.ndarray, token: int, peak: np.floating) -> float:
    """softmax(logits)[token] given the row's largest logit `peak`."""
    return float(np.exp(logits[token] - peak) / np.exp(logits - peak).sum(dtype=np.float64))


_scratch = threading.local()


def _loaded_cpu_library() -> str | None:
    """The ggml CPU library llama.cpp has loaded in this process, from the process's own map
    of its files (Linux): with a portable build that is the variant chosen for this CPU
    (another variant's kernels could use instructions it lacks), with LLAMA_CPP_LIB_PATH the
    library it names. None before llama.cpp's backend is loaded, or where no map is kept."""
    try:
        lines = Path("/proc/self/maps").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and Path(fields[5]).name.startswith("libggml-cpu"):
            return fields[5]
    return None


@functools.cache
def _exp_sum_kernel() -> Callable[[np.ndarray, float], float] | None:
    """Σ exp(row − peak) in one SIMD pass (ggml_vec_soft_max_f32, exported by the ggml CPU
    library llama.cpp runs on), or None where that library or symbol cannot be found or the
    kernel disagrees with numpy on a test row (another signature in another ggml)."""
    path = _loaded_cpu_library()
    if path is None:
        return None
    try:
        function = ctypes.CDLL(path).ggml_vec_soft_max_f32
    except (OSError, AttributeError):
        return None
    function.restype = ctypes.c_double
    function.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_float]

    def exp_sum(row: np.ndarray, peak: float) -> float:
        # The kernel writes exp(row − peak) out as well: into a buffer kept per thread.
        out = getattr(_scratch, "out", None)
        if out is None or out.shape[0] < row.shape[0]:
            out = _scratch.out = np.empty(row.shape[0], dtype=np.float32)
        return float(function(row.shape[0], out.ctypes.data, row.ctypes.data, peak))

    check = np.linspace(-40.0, 12.0, 1031, dtype=np.float32)
    check[::97] = -np.inf
    expected = np.exp(check - check.max()).sum(dtype=np.float64)
    if not abs(exp_sum(check, float(check.max())) - expected) <= 1e-6 * expected:
        return None
    return exp_sum


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
