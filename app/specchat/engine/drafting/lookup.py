"""Prompt lookup: draft by copying what followed an earlier occurrence of the text's ending."""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from specchat.engine.drafting.base import (
    MAX_LOOKUP_K,
    Draft,
    Drafter,
    Offer,
    Outcome,
    through_end,
)
from specchat.engine.drafting.copy_acceptance import CopyAcceptance
from specchat.engine.drafting.registry import register
from specchat.engine.drafting.substitutions import Substitutions
from specchat.engine.types import SamplingParams

#: Candidates few enough to measure one by one (by comparing slices) in `locate`.
FEW = 8


def locate(context: Sequence[int], max_extent: int = 64) -> tuple[int, int]:
    """Where the text's ending occurred before: (position of the token that followed there,
    how far back it agrees, at most `max_extent`), or (-1, 0).

    The occurrence that agrees furthest back wins; among equal ones the most recent.
    """
    n_ctx = len(context)
    if n_ctx < 2:
        return -1, 0
    tokens = np.asarray(context, dtype=np.int64)
    # Earlier occurrences of the final token; the final position itself is excluded since
    # nothing follows it yet. All of them agree with the text's ending over `width` tokens.
    ends = np.flatnonzero(tokens[:-1] == tokens[-1])
    width = 1
    # While there are many, drop those that disagree one token further back, all at once.
    while ends.size > FEW and width < max_extent:
        earlier = ends - width
        agree = earlier >= 0
        agree[agree] = tokens[earlier[agree]] == tokens[n_ctx - 1 - width]
        if not agree.any():
            return int(ends[-1]) + 1, width  # all agree this far and no further: the latest
        ends = ends[agree]
        width += 1
    best, found = 0, -1
    # Slices of a list or tuple compare as a whole (an array's would compare per element).
    text = context if isinstance(context, (list, tuple)) else tokens.tolist()
    # The few left are measured one by one: a copy that has run for forty tokens takes a few
    # slice comparisons rather than forty array steps (this runs every round).
    for end in ends.tolist():
        extent = _agreement(text, end, n_ctx - 1, width, min(max_extent, end + 1))
        if extent >= best:  # ascending positions: the latest of the longest
            best, found = extent, end
    return (found + 1, best) if found >= 0 else (-1, 0)


def _agreement(context: Sequence[int], end: int, last: int, known: int, cap: int) -> int:
    """How many tokens (at most `cap`, at least `known`, which agree already) agree backwards
    from `end` with the text's ending at `last`: agreement over w tokens implies it over
    fewer, so a bisection of slice comparisons finds it."""
    low, high = known, cap
    while low < high:
        mid = (low + high + 1) // 2
        if context[end - mid + 1 : end + 1] == context[last - mid + 1 : last + 1]:
            low = mid
        else:
            high = mid - 1
    return low


@register
class PromptLookupDrafter(Drafter):
    """Draft by copying: find where the text's ending occurred before and propose what followed.

    No model at all, so a draft costs microseconds; it pays where answers repeat their input
    (code edits, extraction, quoting). The occurrence that agrees with the text furthest back
    wins; among equal ones the most recent, since nearby text predicts best. Since proposing
    is free, every proposal `auto` looks at is scored against the text that follows (the
    ledger), so acceptance per match length is learnt at every position, drafted or not.

    Attributes:
        max_extent: how far back a match is followed (and the largest match length reported).
        min_extent: shortest match accepted.
        copies: acceptance by match length and by the target's certainty (learnt from
            every proposal, see CopyAcceptance).
    """

    name = "lookup"
    label = "Prompt lookup"
    priority = 10

    def __init__(self, *, max_extent: int = 64, min_extent: int = 1) -> None:
        super().__init__()
        if not 1 <= min_extent <= max_extent:
            raise ValueError("need 1 <= min_extent <= max_extent")
        self.max_extent = max_extent
        self.min_extent = min_extent
        self.copies = CopyAcceptance()
        self.substitutions = Substitutions(lambda text: locate(text, self.max_extent))
        # The last offer's (position, proposal, match length, ms): the round's draft, if chosen.
        self._offered: tuple[int, tuple[int, ...], int, float] | None = None

    def find(self, context: Sequence[int], k: int) -> tuple[tuple[int, ...], int]:
        """(continuation of up to k tokens, match length), or ((), 0).

        The match length is how far back the text agrees with the earlier occurrence, not just
        the few tokens needed to find it: a copy that has already run for thirty tokens is far
        likelier to go on than one that agrees on a single token, and `auto` sizes its drafts
        by that.
        """
        if k <= 0:
            return (), 0
        return self._continuation(context, *locate(context, self.max_extent), k)

    def _continuation(
        self, context: Sequence[int], start: int, longest: int, k: int
    ) -> tuple[tuple[int, ...], int]:
        if longest < self.min_extent:
            return (), 0
        return tuple(int(t) for t in context[start : start + k]), longest

    def propose(
        self,
        context: Sequence[int],
        k: int,
        sampling: SamplingParams,
        rng: np.random.Generator,
    ) -> Draft:
        offered = self._offered
        if offered is not None and offered[0] == len(context):
            # This round's offer already found the match: copy from it.
            _, tokens, match_len, ms = offered
            return Draft(tokens[:k], None, ms, self.name, match_len)
        began = time.perf_counter()
        tokens, match_len = self._copy(context, k)
        ms = (time.perf_counter() - began) * 1000.0
        return Draft(tokens, None, ms, self.name, match_len)

    def _copy(self, context: Sequence[int], k: int) -> tuple[tuple[int, ...], int]:
        """The copy to propose: lookup's, or the live copy carried through this answer's
        substitutions where that one has run longer (see Substitutions); never past a token
        that ends the answer."""
        if k <= 0:
            return (), 0
        start, longest = locate(context, self.max_extent)
        self.substitutions.track(context, longest, (start, longest))
        tokens, longest = self._continuation(context, start, longest, k)
        carried = self.substitutions.copy(context, k)
        if carried is not None and carried[0] and carried[1] >= longest:
            tokens, longest = carried
        return through_end(tokens, self.ends_answer), longest

    def use_sampling(self, sampling: SamplingParams) -> None:
        self.copies.sampled = not sampling.greedy

    def prepare(self, prompt: Sequence[int], *, eager: bool) -> None:
        """Pending proposals are void, and acceptance starts again from the priors: how
        copies fared in another answer (a code edit before an explanation) predicts little
        for this one, and the ledger relearns within a few dozen tokens."""
        self.copies.restart(len(prompt))
        self.substitutions.restart()
        self._offered = None

    def offer(self, context: Sequence[int], k_cap: int) -> Offer | None:
        began = time.perf_counter()
        tokens, match_len = self._copy(context, k_cap)
        ms = (time.perf_counter() - began) * 1000.0
        self._offered = (len(context), tokens, match_len, ms)
        # Priced and scored (whether drafted or not, see LookupLedger) by the part of the
        # match that counts as evidence.
        counted = self.copies.evidence(len(context), match_len)
        self.copies.note(len(context), tokens, counted)
        return self.offer_match(len(tokens), counted) if tokens else None

    def offer_match(self, length: int, match_len: int) -> Offer:
        """The offer of a proposal of `length` tokens found by a `match_len`-token match."""
        curve = self.copies.curve(match_len, min(length, MAX_LOOKUP_K))
        detail = f"{match_len}-token match, α ≈ {self.copies.alpha(match_len):.2f}"
        return Offer(len(curve) - 1, curve, detail=detail)

    def expected_tokens_curve(self, k_max: int) -> list[float]:
        """Without a match in view: the shortest matches' estimate."""
        return self.copies.curve(1, k_max)

    def observe(self, outcome: Outcome) -> None:
        """Learn from every proposal the text has now decided.

        Memory is counted in tokens of text (about the last hundred), not in scores: the
        proposals made at neighbouring positions overlap and are scored many times over.
        """
        self._offered = None
        self.copies.learn(outcome.context, outcome.margin, outcome.p_emitted)
