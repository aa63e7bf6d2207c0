"""How far a copied draft is kept: acceptance by match length and by how sure the target was.

Prompt lookup and the suffix index both copy what followed an earlier occurrence of the
text's ending. What predicts whether the copy is kept is how far back the match agrees (a
32-token match runs on; a one-token match is a guess) and whether the text is being copied
at all right now. The target's own certainty about the token it just wrote measures the
second for free: where it was sure (its top logit far above the runner-up), the text runs
on predictably — quoted code, a repeated structure — and a copy's first token is kept about
one and a half times as often as where it hesitated (new prose, a fresh identifier).
"""

from __future__ import annotations

import bisect
import copy
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from specchat.engine.costs.priors import (
    LOOKUP_BANDS,
    LOOKUP_DECAY,
    LOOKUP_EXTENTS,
    LOOKUP_PRIOR_CONTINUED,
    LOOKUP_PRIOR_FIRST,
    LOOKUP_PRIOR_WEIGHT,
    OWN_PRIOR_CONTINUED,
    OWN_PRIOR_FIRST,
    SAMPLED_DECAY,
    SAMPLED_PRIOR_WEIGHT,
    SURE_MARGIN,
    SURE_ODDS,
    UNKNOWN_ODDS,
    UNSURE_ODDS,
)
from specchat.engine.drafting.copies.matching import locate

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
        self._aged_to = 0  # the text length its counts are aged to (see age_to)

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

    def aged(self, clock: int) -> LookupSurvival:
        """This estimate as `age_to(clock)` would leave it, without changing it."""
        if clock <= self._aged_to or not any(self.reached):
            return self
        other = copy.copy(self)
        other.age_to(clock)
        return other

    def age_to(self, clock: int) -> None:
        """Age by the tokens of text written since it was last aged to `clock`: estimates are
        aged when read or scored, not all of them every round (a copying drafter keeps 21)."""
        if clock > self._aged_to:
            if any(self.reached):
                self.age(clock - self._aged_to)
            self._aged_to = clock

    def expected_curve(self, k_max: int, ceiling: float = 1.0) -> list[float]:
        """Expected tokens per round (the target's own included) for K = 0 … k_max, no
        position kept more often than `ceiling` (see CopyAcceptance.ceiling)."""
        keep = [min(1.0 - self._hazard(band), ceiling) for band in _BAND_INDEX]
        curve = [1.0]
        survive = total = 1.0
        band = 0
        for position in range(1, k_max + 1):
            # Positions rise one at a time, so the band only ever steps to the next one.
            if band + 1 < len(LOOKUP_BANDS) and position >= LOOKUP_BANDS[band + 1]:
                band += 1
            survive *= keep[band]
            total += survive
            curve.append(total)
        return curve


#: What a proposal is scored in: the estimate that priced it (see CopyAcceptance).
Regime = TypeVar("Regime", bound=Hashable)


class LookupLedger(Generic[Regime]):
    """Scores every copied proposal against the text that followed, drafted or not.

    A copy costs nothing to make, so whether it would have been kept can be learnt at every
    position, not only in the rounds that drafted it: a bucket that lost its standing after
    one bad round would otherwise never be tried again. Each proposed token is scored as soon
    as the text reaches it, so a long copy teaches while it is still being written. At a
    temperature above 0 this is the same evidence in expectation: a deterministic draft token
    d is kept with probability p(d), exactly the chance that the target writes d.
    """

    def __init__(self) -> None:
        self._pending: list[_Pending[Regime]] = []

    def __len__(self) -> int:
        return len(self._pending)

    def note(self, position: int, proposal: Sequence[int], match_len: int, regime: Regime) -> None:
        """Remember that `proposal` was proposed for the text from `position` on, from a
        `match_len`-token match in `regime` (the estimate it is scored in, see
        CopyAcceptance)."""
        if proposal:
            self._pending.append(_Pending(position, tuple(proposal), match_len, regime))

    def settle(self, text: Sequence[int]) -> list[tuple[int, Regime, int, int, bool]]:
        """Score the proposed tokens the text has reached since the last call.

        Returns (match length, regime, tokens scored before, tokens now scored as kept,
        refused) per proposal that moved; a refused token, or the whole proposal kept, closes
        a proposal.
        """
        scored: list[tuple[int, Regime, int, int, bool]] = []
        still: list[_Pending[Regime]] = []
        for pending in self._pending:
            position, proposal, done = pending.position, pending.proposal, pending.scored
            known = min(len(proposal), len(text) - position)
            kept = done
            while kept < known and text[position + kept] == proposal[kept]:
                kept += 1
            ended = kept < known or kept == len(proposal)
            if kept > done or ended:
                refused = ended and kept < len(proposal)
                scored.append((pending.match_len, pending.regime, done, kept - done, refused))
            if not ended:
                pending.scored = kept
                still.append(pending)
        self._pending = still
        return scored

    def clear(self) -> None:
        self._pending.clear()


@dataclass
class _Pending(Generic[Regime]):
    """A proposal the text has not decided yet, and how many of its tokens are scored."""

    position: int
    proposal: tuple[int, ...]
    match_len: int
    regime: Regime
    scored: int = 0


#: Longest match `own_match` measures: past it every match is as good as another.
MAX_OWN_EXTENT = 64


def match_bucket(match_len: int) -> int:
    """The LOOKUP_EXTENTS bucket a `match_len`-token match falls in."""
    return max(0, bisect.bisect_right(LOOKUP_EXTENTS, match_len) - 1)


def _lean(rate: float, odds: float) -> float:
    return rate * odds / (rate * odds + 1.0 - rate)


def _prior_survival(odds: tuple[float, float], own: bool) -> list[LookupSurvival]:
    """One acceptance estimate per match-length bucket, at the priors (of copies of the
    answer itself if `own`) moved by `odds` (for the first token, and for the later ones)."""
    firsts, continueds = (
        (OWN_PRIOR_FIRST, OWN_PRIOR_CONTINUED)
        if own
        else (LOOKUP_PRIOR_FIRST, LOOKUP_PRIOR_CONTINUED)
    )
    return [
        LookupSurvival(_lean(first, odds[0]), _lean(continued, odds[1]))
        for first, continued in zip(firsts, continueds, strict=True)
    ]


#: The target's regime (see CopyAcceptance) and the prior odds it moves copies by.
_REGIME_ODDS = {None: UNKNOWN_ODDS, True: SURE_ODDS, False: UNSURE_ODDS}


class CopyAcceptance:
    """A copying drafter's acceptance estimate: per match-length bucket, per regime — after
    a token the target was sure of, after one it was not, or not known yet (the answer's
    first round) — and apart for copies of the answer's own earlier text (see `own`).

    Every proposal the drafter makes is noted in the ledger with the estimate it was priced
    by, and scored there once the text decides it, drafted or not.

    Attributes:
        ledger: proposals not yet settled by the text.
        sure: the current regime (None until a round has told it).
    """

    def __init__(self) -> None:
        self.ledger: LookupLedger[tuple[bool | None, bool]] = LookupLedger()
        self._survival: dict[tuple[bool | None, bool], list[LookupSurvival]] = {
            (sure, own): _prior_survival(odds, own)
            for sure, odds in _REGIME_ODDS.items()
            for own in (False, True)
        }
        self.sure: bool | None = None
        self.sampled = False  # whether rounds sample (T > 0) rather than decode greedily
        self._text_len = 0
        self._answer_start = 0
        self._answer_known = False  # until restart: no text is the answer's own
        self._clock = 0  # tokens of text written over every answer: the estimates' age
        self._p_sum = 0.0  # decayed sum and count of the sampled tokens' probabilities
        self._p_count = 0.0

    def evidence(self, position: int, match_len: int) -> int:
        """How much of a `match_len`-token match ending at `position` tells whether the copy
        goes on: the match length its acceptance is estimated (and learnt) by.

        At temperature 0 all of it: the answer is a function of the text, so text that agrees
        with an earlier stretch goes on as that stretch did (a regenerated answer is the same
        answer). When sampling, only the part this answer wrote: an identical prompt (a
        regenerate, a question asked again) says nothing about which sample will be drawn,
        while an answer that has followed its source for n sampled tokens has shown that it
        does. Measured on the shipped sessions at T = 0.8, copies of an earlier answer at a
        match of 32 or more (the whole repeated prompt) were priced at α ≈ 0.98 and kept 45 %
        of their tokens; at T = 0 the same copies kept all of them.
        """
        if not self.sampled:
            return match_len
        return min(match_len, max(0, position - self._answer_start))

    @property
    def ceiling(self) -> float:
        """The most often any copied token can be expected to be kept: 1 at temperature 0.

        When sampling, a copied token d is kept with probability p(d). A copy of an earlier
        sample of the same text (a regenerate, a refined answer) is then kept per token at
        Σ p² on average, and the mean probability of the tokens this answer sampled is an
        unbiased estimate of just that: each is p(x) of an x drawn from p. A copy of quoted
        text is kept more often (its token is usually the target's top one), but where the
        target is that sure the mean is near 1 and the ceiling does not bind. Measured at
        T = 0.8 on the shipped prompts (Q4_0): regenerated code wrote tokens at a mean p of
        0.86 and its copies of the earlier sample at matches of 16 or more went on 83 % of
        the time token to token, where the ledger, learning from a short lucky stretch,
        priced them at α ≈ 0.98; code edits wrote at 0.99–1.0 (copies of the given code: 95–99 %).
        """
        if not self.sampled:
            return 1.0
        prior = SAMPLED_PRIOR_WEIGHT
        return (prior + self._p_sum) / (prior + self._p_count)

    def own(self, match_start: int) -> bool:
        """Whether a match that begins at `match_start` of the text lies inside the answer
        being written: a copy of the answer itself, estimated apart.

        An answer that repeats itself (five haiku on one theme, a list of similar items, a
        function written twice) matches its own earlier text for tens of tokens and then
        changes a word. Measured over the shipped and everyday answers at T = 0, such copies'
        first token is kept 35 % of the time after a 2-token match (copies of given text:
        64 %) and 60 % after a 4–7-token one (81 %), and once kept they go on 60–70 % of the
        time token to token (85–90 %).
        """
        return self._answer_known and match_start >= self._answer_start

    def own_match(self, context: Sequence[int], match_len: int) -> bool:
        """Whether the last `match_len` tokens of `context` occur earlier inside the answer
        being written: then the latest of the longest matches is there (see `own`). Searched
        in the answer only, so it costs what the answer's length does, not the chat's."""
        if not self._answer_known or match_len <= 0:
            return False
        answer = context[self._answer_start :]
        _, longest = locate(answer, MAX_OWN_EXTENT)
        return longest >= min(match_len, MAX_OWN_EXTENT)

    def curve(self, match_len: int, k_max: int, own: bool = False) -> list[float]:
        """Expected tokens per round for K = 0 … k_max after a `match_len`-token match (of
        the answer's own text if `own`), in the current regime and under the ceiling: what a
        copying drafter offers."""
        return self.estimate(match_len, own).expected_curve(k_max, self.ceiling)

    def alpha(self, match_len: int, own: bool = False) -> float:
        """The chance the first copied token is kept, as `curve` prices it (for display)."""
        return min(self.estimate(match_len, own).alpha, self.ceiling)

    def estimate(self, match_len: int, own: bool = False) -> LookupSurvival:
        """The estimate for a `match_len`-token match in the current regime, aged to now
        (a copy where it needs ageing: reading it changes nothing)."""
        return self._survival[self.sure, own][match_bucket(match_len)].aged(self._clock)

    def note(
        self, position: int, proposal: Sequence[int], match_len: int, own: bool = False
    ) -> None:
        """The drafter proposed `proposal` for the text from `position` on."""
        self.ledger.note(position, proposal, match_len, (self.sure, own))

    def restart(self, text_len: int) -> None:
        """A new answer: pending proposals are void, and acceptance starts again from the
        priors (how copies fared in another answer predicts little for this one)."""
        self.ledger.clear()
        for estimates in self._survival.values():
            for estimate in estimates:
                estimate.forget()
        self.sure = None
        self._text_len = text_len
        self._answer_start = text_len
        self._answer_known = True
        self._p_sum = self._p_count = 0.0

    def learn(
        self, text: Sequence[int], margin: float | None, p_emitted: Sequence[float] = ()
    ) -> None:
        """Age the estimates by the text written since the last call, score every proposal
        `text` now decides, and take the regime from the target's `margin` on its last token
        (top logit minus the runner-up; None: not known). `p_emitted`: the target's
        probability of each token written since, which sets the ceiling when sampling."""
        if self.sampled:
            for p in p_emitted:
                self._p_sum = self._p_sum * SAMPLED_DECAY + p
                self._p_count = self._p_count * SAMPLED_DECAY + 1.0
        self._clock += len(text) - self._text_len if len(text) > self._text_len else 0
        for match_len, regime, before, kept, refused in self.ledger.settle(text):
            estimate = self._survival[regime][match_bucket(match_len)]
            estimate.age_to(self._clock)
            estimate.score(before, kept, refused)
        self._text_len = len(text)
        self.sure = None if margin is None else margin >= SURE_MARGIN
