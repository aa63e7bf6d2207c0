"""The machine's physical context: target batch costs, draft token cost, and the C++ floor."""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import llama_cpp

from specchat.bench.live.quality import batch_noise
from specchat.engine.llamacpp.model import LlamaModel

if TYPE_CHECKING:
    from specchat.engine.drafting.base import Head

#: Target batch sizes measured (n = K + 1 rows, logits for every row, as verification asks);
#: up to 64 since `auto` checks a long copy in passes that big.
BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class PhysicalCosts:
    """What one target pass and one draft token cost here, and what that allows at α = 1.

    Attributes:
        batch_ms: median milliseconds of a target pass over n tokens, by n.
        draft_token_ms: median milliseconds of one draft-model token (None without a draft).
        context_tokens: tokens in the cache while measuring (attention cost grows with it).
        best_lookup: (K, speed-up) maximising (K+1) / (T(K+1)/T(1)) — free drafts, all kept.
        best_draft: (K, speed-up) maximising (K+1) / (T(K+1)/T(1) + K·d/T(1)), or None.
        logit_noise: largest |logit| difference between a batched row and the same position
            decoded alone, by batch size, after NOISE_CONTEXT cached tokens: llama.cpp may
            pick other kernels for batches, so verification in a batch may flip a greedy
            choice whose margin is below twice this.
        head_token_ms: median milliseconds of one drafted token (a step) of each head over
            the target's hidden state, by the drafter that drafts with it.
    """

    batch_ms: dict[int, float]
    draft_token_ms: float | None
    context_tokens: int
    best_lookup: tuple[int, float]
    best_draft: tuple[int, float] | None
    logit_noise: dict[int, float] = field(default_factory=dict)
    head_token_ms: dict[str, float] = field(default_factory=dict)

    @property
    def max_logit_noise(self) -> float:
        return max(self.logit_noise.values(), default=0.0)

    def relative(self, n: int) -> float:
        return self.batch_ms[n] / self.batch_ms[1]

    def to_json(self) -> dict[str, object]:
        return {
            "batch_ms": {str(n): round(ms, 3) for n, ms in self.batch_ms.items()},
            "batch_relative": {str(n): round(self.relative(n), 3) for n in self.batch_ms},
            "draft_token_ms": None
            if self.draft_token_ms is None
            else round(self.draft_token_ms, 3),
            "draft_relative": (
                None
                if self.draft_token_ms is None
                else round(self.draft_token_ms / self.batch_ms[1], 3)
            ),
            "context_tokens": self.context_tokens,
            "best_lookup": {"k": self.best_lookup[0], "speedup": round(self.best_lookup[1], 3)},
            "best_draft": (
                None
                if self.best_draft is None
                else {"k": self.best_draft[0], "speedup": round(self.best_draft[1], 3)}
            ),
            "logit_noise": {str(n): round(v, 4) for n, v in self.logit_noise.items()},
            "head_token_ms": {name: round(ms, 3) for name, ms in self.head_token_ms.items()},
        }


def best_speedups(
    batch_ms: dict[int, float], draft_token_ms: float | None
) -> tuple[tuple[int, float], tuple[int, float] | None]:
    """The α = 1 ceilings over the measured batch sizes (K = n − 1, never interpolated)."""
    one = batch_ms[1]
    ks = [n - 1 for n in sorted(batch_ms) if n > 1]
    if not ks:
        return (0, 1.0), None if draft_token_ms is None else (0, 1.0)
    lookup = max(((k, (k + 1) / (batch_ms[k + 1] / one)) for k in ks), key=lambda kv: kv[1])
    if draft_token_ms is None:
        return lookup, None
    draft = max(
        ((k, (k + 1) / (batch_ms[k + 1] / one + k * draft_token_ms / one)) for k in ks),
        key=lambda kv: kv[1],
    )
    return lookup, draft


def _median_ms(samples: Sequence[float]) -> float:
    return statistics.median(samples) * 1000.0


def measure_physical(
    target: LlamaModel,
    draft: LlamaModel | None,
    context: Sequence[int],
    *,
    sizes: Sequence[int] = BATCH_SIZES,
    repeats: int = 5,
    heads: Mapping[str, Head] | None = None,
) -> PhysicalCosts:
    """Time target passes of each size, single draft tokens and each head's single drafted
    tokens (`heads`, by drafter: they follow the target's cache) after `context`.

    Each pass is appended after the same cached context and rolled back, so every sample
    sees the same attention length; one unmeasured pass per size warms caches first, and
    the sizes are measured in turn, `repeats` rounds of all of them (medians). Then
    compares each batch's logits with the same positions decoded one token at a time, after
    a conversation's length of cached text (the cache is left holding it).
    """
    context = list(context)
    filler = (context * (1 + max(sizes) // max(1, len(context))))[: max(sizes)]
    _prime(target, context)
    base = target.n_past
    by_size: dict[int, list[float]] = {n: [] for n in sizes}
    # One unmeasured pass of each size warms caches; then the sizes take turns, repeat by
    # repeat, so a slow spell of the machine lands on every size alike instead of bending
    # the curve at whichever size it hit (the median of each size's turns is its cost).
    for i in range(repeats + 1):
        for n in sizes:
            began = time.perf_counter()
            target.decode(filler[:n], logits="all")
            elapsed = time.perf_counter() - began
            target.truncate(base)
            if i:
                by_size[n].append(elapsed)
    batch_ms = {n: _median_ms(by_size[n]) for n in sizes}
    # At a conversation's length, not the prompt's: see quality.NOISE_CONTEXT.
    noise = batch_noise(target, context, sizes=sizes)
    draft_ms = None
    if draft is not None:
        _prime(draft, context)
        draft_base = draft.n_past
        samples = []
        for i in range(repeats * 3 + 1):
            began = time.perf_counter()
            draft.decode(filler[:1], logits="last")
            elapsed = time.perf_counter() - began
            draft.truncate(draft_base)
            if i:
                samples.append(elapsed)
        draft_ms = _median_ms(samples)
    head_ms = {
        name: _head_token_ms(head, filler[0], repeats * 3) for name, head in (heads or {}).items()
    }
    lookup, best_draft = best_speedups(batch_ms, draft_ms)
    return PhysicalCosts(batch_ms, draft_ms, len(context), lookup, best_draft, noise, head_ms)


def _head_token_ms(head: Head, token: int, repeats: int) -> float:
    """Median milliseconds of one step of `head` after the target's cache (one unmeasured
    step first)."""
    samples = []
    for i in range(repeats + 1):
        began = time.perf_counter()
        head.draft(token, 1)
        elapsed = time.perf_counter() - began
        if i:
            samples.append(elapsed)
    return _median_ms(samples)


def _prime(model: LlamaModel, context: Sequence[int]) -> None:
    cached = model.sync(context)
    if cached < len(context):
        model.decode(context[cached:], logits="none")


@dataclass(frozen=True)
class FloorRun:
    """Greedy plain decoding by llama.cpp itself, with Python only driving the loop.

    Attributes:
        tokens: the tokens generated (the end-of-generation token excluded).
        elapsed_s: wall time of the decode loop (prompt evaluation excluded).
    """

    tokens: tuple[int, ...]
    elapsed_s: float

    @property
    def tokens_per_s(self) -> float:
        return len(self.tokens) / self.elapsed_s if self.elapsed_s > 0 else 0.0


def cpp_floor(model: LlamaModel, prompt: Sequence[int], *, max_tokens: int) -> FloorRun:
    """Plain greedy decoding through llama_decode and llama.cpp's own greedy sampler.

    Does exactly the work plain mode does per token — one single-token llama_decode and one
    argmax — with no logits copied to Python, so plain mode ÷ this is the Python loop's
    overhead. The cache is primed with prompt[:-1] like the decoder's, and the timed loop
    starts by evaluating the prompt's last token, so both count the same passes.
    """
    prompt = list(prompt)
    _prime(model, prompt[:-1])
    model.mark()  # a recurrent state comes back from here (see put_back_after_raw_decodes)
    # The wrapper has no raw-loop API; this reaches into its context on purpose and puts the
    # cache back where it was afterwards so its token bookkeeping stays true.
    ctx = model._ctx
    sampler = llama_cpp.llama_sampler_init_greedy()
    out: list[int] = []
    token_buf = (llama_cpp.llama_token * 1)()
    try:
        began = time.perf_counter()
        token_buf[0] = prompt[-1]
        for _ in range(max_tokens):
            if llama_cpp.llama_decode(ctx, llama_cpp.llama_batch_get_one(token_buf, 1)) != 0:
                raise RuntimeError("llama_decode failed in the C++ floor loop")
            token = llama_cpp.llama_sampler_sample(sampler, ctx, -1)
            if model.is_eog(token):
                break
            out.append(token)
            token_buf[0] = token
        elapsed = time.perf_counter() - began
    finally:
        llama_cpp.llama_sampler_free(sampler)
        model.put_back_after_raw_decodes()
    return FloorRun(tuple(out), elapsed)
