"""Drafters: propose the next tokens cheaply, for the target to check in one pass."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from specchat.engine.llama import LlamaModel
from specchat.engine.sampling import probabilities, sample
from specchat.engine.types import DraftMode, SamplingParams


@dataclass(frozen=True)
class Draft:
    """Proposed tokens.

    Attributes:
        tokens: the proposal, possibly shorter than asked (or empty).
        probs: the drafter's probability vector q for each token, or None when the drafter
            is deterministic (q is then one-hot at each token).
        ms: time spent proposing.
        source: which drafter produced it (LOOKUP or DRAFT).
        match_len: for prompt lookup, the n-gram length that matched (0 otherwise).
        catchup: for the draft model, context tokens it had to evaluate before drafting
            (1–2 normally; the whole prompt the first time).
        catchup_ms: the part of `ms` spent on that catch-up.
    """

    tokens: tuple[int, ...]
    probs: tuple[np.ndarray, ...] | None
    ms: float
    source: DraftMode
    match_len: int = 0
    catchup: int = 0
    catchup_ms: float = 0.0


EMPTY_LOOKUP = Draft((), None, 0.0, DraftMode.LOOKUP)


class Drafter(Protocol):
    """Something that proposes up to k tokens to follow `context`."""

    def propose(
        self,
        context: Sequence[int],
        k: int,
        sampling: SamplingParams,
        rng: np.random.Generator,
    ) -> Draft: ...


class PromptLookupDrafter:
    """Draft by copying: find where the text's ending occurred before and propose what followed.

    No model at all, so a draft costs microseconds; it pays where answers repeat their input
    (code edits, extraction, quoting). The occurrence that agrees with the text furthest back
    wins; among equal ones the most recent, since nearby text predicts best.

    Attributes:
        max_extent: how far back a match is followed (and the largest match length reported).
        min_extent: shortest match accepted.
    """

    def __init__(self, *, max_extent: int = 64, min_extent: int = 1) -> None:
        if not 1 <= min_extent <= max_extent:
            raise ValueError("need 1 <= min_extent <= max_extent")
        self.max_extent = max_extent
        self.min_extent = min_extent

    def find(self, context: Sequence[int], k: int) -> tuple[tuple[int, ...], int]:
        """(continuation of up to k tokens, match length), or ((), 0).

        The match length is how far back the text agrees with the earlier occurrence, not just
        the few tokens needed to find it: a copy that has already run for thirty tokens is far
        likelier to go on than one that agrees on a single token, and `auto` sizes its drafts
        by that.
        """
        n_ctx = len(context)
        if k <= 0 or n_ctx < 2:
            return (), 0
        tokens = np.asarray(context, dtype=np.int64)
        # Earlier occurrences of the final token; the final position itself is excluded since
        # nothing follows it yet.
        ends = np.flatnonzero(tokens[:-1] == tokens[-1])
        if ends.size == 0:
            return (), 0
        # Extend every candidate backwards while it still agrees with the text's ending.
        extent = np.ones(ends.size, dtype=np.int64)
        alive = np.ones(ends.size, dtype=bool)
        for offset in range(1, self.max_extent):
            earlier = ends - offset
            alive &= earlier >= 0
            if not alive.any():
                break
            alive[alive] = tokens[earlier[alive]] == tokens[n_ctx - 1 - offset]
            extent += alive
        longest = int(extent.max())
        if longest < self.min_extent:
            return (), 0
        start = int(ends[extent == longest][-1]) + 1
        return tuple(int(t) for t in tokens[start : start + k]), longest

    def propose(
        self,
        context: Sequence[int],
        k: int,
        sampling: SamplingParams,
        rng: np.random.Generator,
    ) -> Draft:
        began = time.perf_counter()
        tokens, n = self.find(context, k)
        ms = (time.perf_counter() - began) * 1000.0
        return Draft(tokens, None, ms, DraftMode.LOOKUP, n)


class DraftModelDrafter:
    """Draft with a small model sharing the target's vocabulary.

    Its KV cache is kept in step with the accepted text: each proposal first syncs the cache
    to the context (reusing the common prefix, so only the last round's correction is new),
    then decodes one token at a time. Greedy settings draft the argmax; otherwise tokens are
    sampled from q, the draft's distribution under the same sampling settings, and q is
    returned for rejection sampling.

    Attributes:
        model: the draft model.
        min_confidence: stop drafting once the draft's top probability falls below this
            (0 disables); low confidence predicts rejection, and each extra token costs.
    """

    def __init__(self, model: LlamaModel, *, min_confidence: float = 0.0) -> None:
        self.model = model
        self.min_confidence = min_confidence

    def propose(
        self,
        context: Sequence[int],
        k: int,
        sampling: SamplingParams,
        rng: np.random.Generator,
    ) -> Draft:
        began = time.perf_counter()
        model = self.model
        if k <= 0:
            return Draft((), None if sampling.greedy else (), 0.0, DraftMode.DRAFT)
        k = min(k, model.n_ctx - len(context))
        if k <= 0:
            return Draft((), None if sampling.greedy else (), 0.0, DraftMode.DRAFT)
        cached = model.sync(context)
        if cached == len(context):
            # The whole context is cached but its last logits are gone: re-evaluate it.
            model.truncate(cached - 1)
            cached -= 1
        catchup = len(context) - cached
        logits = model.decode(context[cached:], logits="last")[0]
        catchup_ms = (time.perf_counter() - began) * 1000.0
        tokens: list[int] = []
        qs: list[np.ndarray] = []
        for i in range(k):
            if sampling.greedy:
                token = int(np.argmax(logits))
                if self.min_confidence > 0 and i > 0:
                    q = probabilities(logits, SamplingParams(temperature=1.0))
                    if q[token] < self.min_confidence:
                        break
            else:
                q = probabilities(logits, sampling)
                token = sample(q, rng)
                if self.min_confidence > 0 and i > 0 and q.max() < self.min_confidence:
                    break
                qs.append(q)
            tokens.append(token)
            if i + 1 < k:
                logits = model.decode([token], logits="last")[0]
        ms = (time.perf_counter() - began) * 1000.0
        probs = None if sampling.greedy else tuple(qs)
        return Draft(
            tuple(tokens), probs, ms, DraftMode.DRAFT, catchup=catchup, catchup_ms=catchup_ms
        )


class ChainDrafter:
    """Prompt lookup first (free), the draft model when lookup finds nothing."""

    def __init__(self, lookup: PromptLookupDrafter, model: DraftModelDrafter) -> None:
        self.lookup = lookup
        self.model = model

    def propose(
        self,
        context: Sequence[int],
        k: int,
        sampling: SamplingParams,
        rng: np.random.Generator,
    ) -> Draft:
        draft = self.lookup.propose(context, k, sampling, rng)
        if draft.tokens:
            return draft
        second = self.model.propose(context, k, sampling, rng)
        return Draft(second.tokens, second.probs, draft.ms + second.ms, second.source)
