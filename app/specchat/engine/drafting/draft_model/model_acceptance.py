"""The draft model's acceptance, learnt from every token written: drafted or not.

A draft model's acceptance follows the text: it agrees with the target on boilerplate and
quoted code, and far less in new prose. Learnt only from the rounds it drafts, the estimate
froze wherever the draft model stopped being used: one rejected draft at an answer's start
left it below the bar for the rest of the answer, however predictable the text became, and
the probes that should have corrected it cost more than their budget allowed.

The target says at every token it writes how predictable the text is: its margin, top logit
minus runner-up (the verify pass computes it anyway). A draft model whose mistakes fall where
the target itself hesitates agrees with the target's choice about as often as the target's
top token is likely, and with two leading candidates that is σ(margin). So every written
token is evidence of what the draft model would keep: where it drafted, whether its token was
kept; elsewhere, the agreement its margin predicts, calibrated on the positions it did draft.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence

from specchat.engine.costs.priors import (
    CALIBRATION_WEIGHT,
    CONFIDENCE_BANDS,
    ESTIMATES_STORED_CAP,
    MARGIN_BANDS,
    PRIOR_WEIGHT,
    TEXT_DECAY,
)
from specchat.engine.drafting.base import Acceptance, count_lists


def _stored_counts(counts: dict[str, list[float]], seen: list[float]) -> dict[str, object]:
    """A calibration's band counts as plain data, with how much it has seen: past
    ESTIMATES_STORED_CAP observations all shrink alike (rates kept), so that what later
    sessions see keeps its say."""
    observed = sum(seen)
    shrink = min(1.0, ESTIMATES_STORED_CAP / observed) if observed > 0 else 1.0
    state: dict[str, object] = {name: [c * shrink for c in v] for name, v in counts.items()}
    state["observed"] = observed * shrink
    return state


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


class MarginCalibration:
    """How often the draft model's token is the target's, by the target's margin there: a
    Beta estimate per margin band, its prior σ(the band's lower edge).

    Attributes:
        kept, seen: drafted positions per band, and how many of them were kept.
    """

    def __init__(self) -> None:
        self._prior = [_sigmoid(edge) for edge in MARGIN_BANDS]
        self.kept = [0.0] * len(MARGIN_BANDS)
        self.seen = [0.0] * len(MARGIN_BANDS)

    @staticmethod
    def band(margin: float) -> int:
        return max(0, bisect.bisect_right(MARGIN_BANDS, margin) - 1)

    def agreement(self, margin: float) -> float:
        """The chance the draft model's token is kept where the target wrote with `margin`."""
        b = self.band(margin)
        w = CALIBRATION_WEIGHT
        return (self._prior[b] * w + self.kept[b]) / (w + self.seen[b])

    def learnt(self) -> dict[str, object]:
        """Its counts as plain data, to be stored (see drafting/stored_estimates.py)."""
        return _stored_counts({"kept": self.kept, "seen": self.seen}, self.seen)

    def resume(self, state: Mapping[str, object]) -> None:
        """Start from counts `learnt` gave (ValueError where they are not its bands')."""
        counts = count_lists(state, ("kept", "seen"), len(MARGIN_BANDS))
        self.kept, self.seen = counts["kept"], counts["seen"]

    def learn(self, margin: float, kept: bool) -> None:
        b = self.band(margin)
        self.seen[b] += 1.0
        self.kept[b] += 1.0 if kept else 0.0


class TextAcceptance(Acceptance):
    """The draft model's acceptance on the recent text, counted per written token.

    The counts are Acceptance's: a first token kept with `alpha`, a token after a kept one
    with `continued`. Each written token adds its agreement (1 or 0 where the draft model
    drafted it, the calibrated agreement for its margin elsewhere) to the first-token counts,
    and, weighted by the agreement of the token before it, to the continued counts: runs of
    confident text make long drafts worth more, as they are.

    Attributes:
        calibration: agreement by margin, one per way of sampling (greedy or not: a sampled
            draft token is kept by another rule).
    """

    def __init__(self, alpha: float, continued: float, weight: float = PRIOR_WEIGHT) -> None:
        super().__init__(alpha * weight, weight, continued * weight, weight, decay=TEXT_DECAY)
        self.calibration = {True: MarginCalibration(), False: MarginCalibration()}
        self._previous: float | None = None  # the last written token's agreement

    def learn(
        self,
        margins: Sequence[float],
        drafted: int,
        kept: int,
        *,
        greedy: bool = True,
    ) -> None:
        """One round's written tokens: `margins`, the target's at each; the draft model's
        draft, `drafted` tokens of which the first `kept` were kept (0 and 0 where it did
        not draft). Without margins only the drafted positions teach."""
        calibration = self.calibration[greedy]
        positions = max(len(margins), min(drafted, kept + 1))
        for i in range(positions):
            margin = margins[i] if i < len(margins) else None
            if i < drafted and i <= kept:
                agreed = i < kept
                if margin is not None:
                    calibration.learn(margin, agreed)
                self._add(1.0 if agreed else 0.0)
            elif margin is not None:
                self._add(calibration.agreement(margin))

    def _add(self, agreement: float) -> None:
        d = self.decay
        self.observed += 1
        self.first_kept = self.first_kept * d + agreement
        self.first_trials = self.first_trials * d + 1.0
        self.cont_kept *= d
        self.cont_trials *= d
        if self._previous is not None:
            self.cont_kept += self._previous * agreement
            self.cont_trials += self._previous
        self._previous = agreement


_CONFIDENCE_COUNTS = ("kept", "seen", "next_kept", "next_seen")


class ConfidenceCalibration:
    """How often a drafted token is kept, by the draft model's confidence in it (its top
    probability), given that the tokens before it were kept; and how often the token after
    it is: a run of sure tokens tends to go on. A Beta estimate per band for each, whose prior
    is the confidence itself (a calibrated model's own probability), learnt from every
    drafted token whose fate was seen.

    Attributes:
        kept, seen: drafted tokens per band, and how many of them were kept.
        next_kept, next_seen: kept tokens per band followed by a drafted one, and how many
            of those next ones were kept.
    """

    def __init__(self) -> None:
        bands = len(CONFIDENCE_BANDS)
        self.kept, self.seen = [0.0] * bands, [0.0] * bands
        self.next_kept, self.next_seen = [0.0] * bands, [0.0] * bands

    @staticmethod
    def band(confidence: float) -> int:
        return max(0, bisect.bisect_right(CONFIDENCE_BANDS, confidence) - 1)

    def kept_rate(self, confidence: float) -> float:
        """The chance a drafted token of this confidence is kept (its predecessors were)."""
        b = self.band(confidence)
        w = CALIBRATION_WEIGHT
        return (confidence * w + self.kept[b]) / (w + self.seen[b])

    def next_rate(self, confidence: float) -> float:
        """The chance the token after a kept one of this confidence is kept too."""
        b = self.band(confidence)
        w = CALIBRATION_WEIGHT
        return (confidence * w + self.next_kept[b]) / (w + self.next_seen[b])

    def learnt(self) -> dict[str, object]:
        """Its counts as plain data, to be stored (see drafting/stored_estimates.py)."""
        counts = {name: getattr(self, name) for name in _CONFIDENCE_COUNTS}
        return _stored_counts(counts, self.seen)

    def resume(self, state: Mapping[str, object]) -> None:
        """Start from counts `learnt` gave (ValueError where they are not its bands')."""
        counts = count_lists(state, _CONFIDENCE_COUNTS, len(CONFIDENCE_BANDS))
        self.__dict__.update(counts)

    def learn(self, confidences: Sequence[float], kept: int) -> None:
        """A draft's tokens (by their confidence), the first `kept` of them kept: each up to
        the first refused one teaches its band."""
        seen = confidences[: kept + 1]
        for i, confidence in enumerate(seen):
            b = self.band(confidence)
            self.seen[b] += 1.0
            self.kept[b] += 1.0 if i < kept else 0.0
            if i < kept and i + 1 < len(seen):
                self.next_seen[b] += 1.0
                self.next_kept[b] += 1.0 if i + 1 < kept else 0.0
