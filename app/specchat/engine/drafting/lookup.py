"""Prompt lookup: draft by copying what followed an earlier occurrence of the text's ending."""

from __future__ import annotations

import bisect
import time
from collections.abc import Sequence

import numpy as np

from specchat.engine.drafting.base import MAX_LOOKUP_K, Draft, Drafter, Offer, Outcome
from specchat.engine.drafting.registry import register
from specchat.engine.types import SamplingParams

#: Lower bounds of the match-length buckets for prompt lookup's acceptance estimate: how far
#: back the text agrees with the copied source predicts how far forward it will go on.
LOOKUP_EXTENTS = (1, 2, 3, 4, 8, 16, 32)
#: Prior acceptance of the first lookup token and of each later one, per bucket: measured
#: over the shipped bench prompts' answers (a one-token match is kept a quarter of the time,
#: a 32-token one almost always, and then runs on for twenty-odd tokens).
LOOKUP_PRIOR_FIRST = (0.25, 0.45, 0.65, 0.75, 0.85, 0.95, 0.97)
LOOKUP_PRIOR_CONTINUED = (0.6, 0.7, 0.75, 0.8, 0.9, 0.95, 0.96)
#: Lookup acceptance is scored at every position (see LookupLedger), so its memory is counted
#: in tokens of text: about the last hundred.
LOOKUP_DECAY = 0.99
#: Weight of the lookup priors, in proposals: they never age (see LookupSurvival).
LOOKUP_PRIOR_WEIGHT = 5.0
#: First draft positions (1-based) of the bands that share one refusal rate in a lookup
#: bucket's survival estimate: positions far out are reached rarely, so they pool their counts.
LOOKUP_BANDS = (1, 2, 3, 5, 9, 17, 33)

_BAND_INDEX = range(len(LOOKUP_BANDS))


class LookupSurvival:
    """How far a lookup proposal is kept, as a refusal rate per draft position band.

    Kept runs are not geometric: a copy either breaks at once or runs to the next edit, so
    one rate per position band (Kaplan–Meier with pooled bands) prices a long draft far
    better than a first-token and a continued rate. Counts age per token of text.

    Attributes:
        refused, reached: measured (decayed) counts per band.
    """

    def __init__(self, first: float, continued: float, weight: float = LOOKUP_PRIOR_WEIGHT) -> None:
        # The prior never ages: a bucket seen only a few times in the last hundred tokens keeps
        # leaning on it instead of swinging on one or two scores.
        self._prior_refused = [
            weight * (1.0 - (first if b == 0 else continued)) for b in _BAND_INDEX
        ]
        self._prior_reached = [weight] * len(LOOKUP_BANDS)
        self.refused = [0.0] * len(LOOKUP_BANDS)
        self.reached = [0.0] * len(LOOKUP_BANDS)

    def _band(self, position: int) -> int:
        return bisect.bisect_right(LOOKUP_BANDS, position) - 1

    def _hazard(self, band: int) -> float:
        refused = self._prior_refused[band] + self.refused[band]
        return refused / (self._prior_reached[band] + self.reached[band])

    @property
    def alpha(self) -> float:
        """Chance the first proposed token is kept."""
        return 1.0 - self._hazard(0)

    def score(self, before: int, kept: int, refused: bool) -> None:
        """Count positions before+1 … before+kept as kept, then one refusal if `refused`."""
        for position in range(before + 1, before + kept + 2 if refused else before + kept + 1):
            band = self._band(position)
            self.reached[band] += 1.0
            if position > before + kept:
                self.refused[band] += 1.0

    def forget(self) -> None:
        """Drop everything measured; only the prior remains."""
        self.refused = [0.0] * len(LOOKUP_BANDS)
        self.reached = [0.0] * len(LOOKUP_BANDS)

    def age(self, steps: int) -> None:
        """Forget by `steps` decay steps (both counts shrink, so the rates stay put)."""
        factor = LOOKUP_DECAY**steps
        self.refused = [r * factor for r in self.refused]
        self.reached = [r * factor for r in self.reached]

    def expected_curve(self, k_max: int) -> list[float]:
        """Expected tokens per round (the target's own included) for K = 0 … k_max."""
        hazard = [self._hazard(band) for band in _BAND_INDEX]
        curve = [1.0]
        survive = 1.0
        for position in range(1, k_max + 1):
            survive *= 1.0 - hazard[self._band(position)]
            curve.append(curve[-1] + survive)
        return curve


class LookupLedger:
    """Scores every prompt-lookup proposal against the text that followed, drafted or not.

    A lookup draft costs nothing to make, so whether it would have been kept can be learnt at
    every position, not only in the rounds that drafted it: a bucket that lost its standing
    after one bad round would otherwise never be tried again. Each proposed token is scored
    as soon as the text reaches it, so a long copy teaches while it is still being written.
    At a temperature above 0 this is the same evidence in expectation: a deterministic draft
    token d is kept with probability p(d), exactly the chance that the target writes d.
    """

    def __init__(self) -> None:
        # [position the proposal starts at, proposal, match length, tokens already scored]
        self._pending: list[tuple[int, tuple[int, ...], int, int]] = []

    def __len__(self) -> int:
        return len(self._pending)

    def note(self, position: int, proposal: Sequence[int], match_len: int) -> None:
        """Remember that lookup proposed `proposal` for the text from `position` on."""
        if proposal:
            self._pending.append((position, tuple(proposal), match_len, 0))

    def settle(self, text: Sequence[int]) -> list[tuple[int, int, int, bool]]:
        """Score the proposed tokens the text has reached since the last call.

        Returns (match length, tokens scored before, tokens now scored as kept, refused) per
        proposal that moved; a refused token, or the whole proposal kept, closes a proposal.
        """
        scored: list[tuple[int, int, int, bool]] = []
        still: list[tuple[int, tuple[int, ...], int, int]] = []
        for position, proposal, match_len, done in self._pending:
            known = min(len(proposal), len(text) - position)
            kept = done
            while kept < known and text[position + kept] == proposal[kept]:
                kept += 1
            ended = kept < known or kept == len(proposal)
            if kept > done or ended:
                scored.append((match_len, done, kept - done, ended and kept < len(proposal)))
            if not ended:
                still.append((position, proposal, match_len, kept))
        self._pending = still
        return scored

    def clear(self) -> None:
        self._pending.clear()


def match_bucket(match_len: int) -> int:
    """The LOOKUP_EXTENTS bucket a `match_len`-token match falls in."""
    return max(0, bisect.bisect_right(LOOKUP_EXTENTS, match_len) - 1)


def prior_survival() -> list[LookupSurvival]:
    """One acceptance estimate per match-length bucket, at the priors."""
    return [
        LookupSurvival(first, continued)
        for first, continued in zip(LOOKUP_PRIOR_FIRST, LOOKUP_PRIOR_CONTINUED, strict=True)
    ]


def restart_learning(survival: Sequence[LookupSurvival], ledger: LookupLedger) -> None:
    """Pending proposals are void, and acceptance starts again from the priors."""
    ledger.clear()
    for estimate in survival:
        estimate.forget()


def learn_from_text(
    survival: Sequence[LookupSurvival], ledger: LookupLedger, text: Sequence[int], text_len: int
) -> int:
    """Age the estimates by the text written since it was `text_len` tokens long, and score
    every proposal `text` now decides; returns the new text length."""
    grown = len(text) - text_len if len(text) > text_len else 0
    if grown:
        for estimate in survival:
            estimate.age(grown)
    for match_len, before, kept, refused in ledger.settle(text):
        survival[match_bucket(match_len)].score(before, kept, refused)
    return len(text)


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
        survival: acceptance estimate per match-length bucket (see LOOKUP_EXTENTS).
        ledger: proposals not yet settled by the text.
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
        self.survival = prior_survival()
        self.ledger = LookupLedger()
        self._text_len = 0
        # The last offer's (position, proposal, match length, ms): the round's draft, if chosen.
        self._offered: tuple[int, tuple[int, ...], int, float] | None = None

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

    @staticmethod
    def bucket(match_len: int) -> int:
        return match_bucket(match_len)

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
        tokens, match_len = self.find(context, k)
        ms = (time.perf_counter() - began) * 1000.0
        return Draft(tokens, None, ms, self.name, match_len)

    def prepare(self, prompt: Sequence[int], *, eager: bool) -> None:
        """Pending proposals are void, and acceptance starts again from the priors: how
        copies fared in another answer (a code edit before an explanation) predicts little
        for this one, and the ledger relearns within a few dozen tokens."""
        restart_learning(self.survival, self.ledger)
        self._offered = None
        self._text_len = len(prompt)

    def offer(self, context: Sequence[int], k_cap: int) -> Offer | None:
        began = time.perf_counter()
        tokens, match_len = self.find(context, k_cap)
        ms = (time.perf_counter() - began) * 1000.0
        self._offered = (len(context), tokens, match_len, ms)
        # Scored whether drafted or not (see LookupLedger).
        self.ledger.note(len(context), tokens, match_len)
        return self.offer_match(len(tokens), match_len) if tokens else None

    def offer_match(self, length: int, match_len: int) -> Offer:
        """The offer of a proposal of `length` tokens found by a `match_len`-token match."""
        survival = self.survival[self.bucket(match_len)]
        curve = survival.expected_curve(min(length, MAX_LOOKUP_K))
        detail = f"{match_len}-token match, α ≈ {survival.alpha:.2f}"
        return Offer(len(curve) - 1, curve, detail=detail)

    def expected_tokens_curve(self, k_max: int) -> list[float]:
        """Without a match in view: the shortest matches' estimate."""
        return self.survival[0].expected_curve(k_max)

    def observe(self, outcome: Outcome) -> None:
        """Learn from every proposal the text has now decided.

        Memory is counted in tokens of text (about the last hundred), not in scores: the
        proposals made at neighbouring positions overlap and are scored many times over.
        """
        self._offered = None
        self._text_len = learn_from_text(
            self.survival, self.ledger, outcome.context, self._text_len
        )
