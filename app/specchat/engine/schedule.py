"""K policy: a fixed K, or `auto`, which prices every option with a cost model fitted online."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field

from specchat.engine.types import DraftMode, PolicyChoice

#: Longest draft of a fixed K (the window's slider) and of the draft model under `auto`.
MAX_K = 16

#: Longest prompt-lookup draft under `auto`. Lookup drafts cost nothing to make, and on a CPU a
#: target pass's cost per row keeps falling with its size (≈ 36 ms for one token, ≈ 20 ms a
#: row at 16, ≈ 13 ms at 64 on a 2-core laptop), so a long copy is checked fastest in big
#: batches; the auto policy only asks for them where the match says the copy will go on.
MAX_LOOKUP_K = 64

#: Relative cost of one more token in a target batch, before anything is measured. On a
#: 2-core CPU a batch of n with logits for every row measured 1.8× (n = 2) to 9× (n = 16) one
#: token; on a GPU the extra rows are nearly free. Calibration and then every round replace
#: these guesses with measurements.
PRIOR_BATCH_SLOPE = {"cpu": 0.8, "gpu": 0.05}

#: Share of decoding time that probing may cost: a probe is made only when its expected
#: extra cost is at most this share of the plain time since the last one.
PROBE_BUDGET = 0.03

#: Expected gain over plain a drafter must promise before it is used: estimated acceptance
#: and costs both carry noise, and choosing a drafter on a marginal estimate loses more often
#: than it wins.
HURDLE = 0.1

#: Batch sizes the calibration times (interpolated in between, extrapolated beyond).
CALIBRATION_SIZES = (1, 2, 4, 8, 16, 32)

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


def expected_tokens(alpha: float, k: int, continued: float | None = None) -> float:
    """Mean tokens per round with k drafts: the first kept with probability alpha, each later
    one (given the one before was kept) with probability `continued` (default: alpha).

    Every round adds one target token, so E = 1 + α·(1 + c + c² + … + c^(k−1)).
    """
    if k <= 0:
        return 1.0
    c = alpha if continued is None else continued
    run = float(k) if c >= 1.0 else (1.0 - c**k) / (1.0 - c)
    return 1.0 + alpha * run


@dataclass
class _Acceptance:
    """Decayed acceptance counts: of a drafter's first token, and of a token after a kept one.

    Copied text is kept in runs — once a lookup draft is right, the next token usually is too —
    so one per-token rate would undervalue long drafts; two rates capture that.
    """

    first_kept: float
    first_trials: float
    cont_kept: float
    cont_trials: float
    # Short memory (about ten rounds): acceptance changes with the kind of text being written,
    # and rounds spent on a drafter that stopped paying are lost time.
    decay: float = 0.9

    @classmethod
    def prior(cls, alpha: float, continued: float, weight: float = 2.0) -> _Acceptance:
        return cls(alpha * weight, weight, continued * weight, weight)

    @property
    def alpha(self) -> float:
        """Acceptance of the first draft token."""
        return self.first_kept / self.first_trials if self.first_trials > 0 else 0.0

    @property
    def continued(self) -> float:
        """Acceptance of a draft token whose predecessor was kept."""
        return self.cont_kept / self.cont_trials if self.cont_trials > 0 else 0.0

    def expected(self, k: int) -> float:
        return expected_tokens(self.alpha, k, self.continued)

    def update(self, drafted: int, accepted: int) -> None:
        if drafted <= 0:
            return
        self.first_kept *= self.decay
        self.first_trials *= self.decay
        self.cont_kept *= self.decay
        self.cont_trials *= self.decay
        self.first_trials += 1
        if accepted:
            self.first_kept += 1
            # After the first: accepted − 1 successes, then one failure unless all were kept.
            self.cont_kept += accepted - 1
            self.cont_trials += accepted - 1 + (1 if accepted < drafted else 0)


#: Weight of the lookup priors, in proposals: they never age (see _LookupSurvival).
LOOKUP_PRIOR_WEIGHT = 5.0

#: First draft positions (1-based) of the bands that share one refusal rate in a lookup
#: bucket's survival estimate: positions far out are reached rarely, so they pool their counts.
LOOKUP_BANDS = (1, 2, 3, 5, 9, 17, 33)


class _LookupSurvival:
    """How far a lookup proposal is kept, as a refusal rate per draft position band.

    Kept runs are not geometric: a copy either breaks at once or runs to the next edit, so
    one rate per position band (Kaplan–Meier with pooled bands) prices a long draft far
    better than a first-token and a continued rate. Counts age per token of text.
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


_BAND_INDEX = range(len(LOOKUP_BANDS))


#: A measurement this many times the current estimate is mostly a stall (another process,
#: a page fault): it moves the estimate as if it were this many times, no more.
STALL_FACTOR = 3.0


def _damped(ms: float, estimate: float) -> float:
    return min(ms, STALL_FACTOR * estimate)


@dataclass
class CostModel:
    """Measured costs: the target's time for a batch of n tokens, the draft's per token.

    Attributes:
        slope: prior relative cost of one more batch row (see PRIOR_BATCH_SLOPE).
        batch_ms: smoothed milliseconds per target pass, keyed by batch size n = K + 1.
        draft_token_ms: smoothed milliseconds per draft-model token.
        catchup_token_ms: smoothed milliseconds per token of a draft-model catch-up (a batched
            evaluation of the text written since the draft model was last used).
    """

    slope: float
    batch_ms: dict[int, float] = field(default_factory=dict)
    draft_token_ms: float | None = None
    catchup_token_ms: float | None = None
    smoothing: float = 0.2

    def seed(self, batch_ms: dict[int, float], draft_token_ms: float | None) -> None:
        """Start from calibrated measurements instead of the prior shape.

        A smaller batch never costs more than a bigger one, and stalls only ever inflate a
        measurement, so each size is capped by every bigger size's cost.
        """
        running = float("inf")
        for n in sorted(batch_ms, reverse=True):
            running = min(running, batch_ms[n])
            self.batch_ms[n] = running
        if draft_token_ms is not None:
            self.draft_token_ms = draft_token_ms

    def observe_batch(self, n: int, ms: float) -> None:
        old = self.batch_ms.get(n)
        self.batch_ms[n] = ms if old is None else old + self.smoothing * (_damped(ms, old) - old)

    def observe_draft(self, tokens: int, ms: float) -> None:
        if tokens <= 0:
            return
        per_token = ms / tokens
        old = self.draft_token_ms
        self.draft_token_ms = (
            per_token if old is None else old + self.smoothing * (_damped(per_token, old) - old)
        )

    def observe_catchup(self, tokens: int, ms: float) -> None:
        if tokens <= 0:
            return
        per_token = ms / tokens
        old = self.catchup_token_ms
        self.catchup_token_ms = (
            per_token if old is None else old + self.smoothing * (per_token - old)
        )

    def catchup_ms(self, tokens: int) -> float:
        """Estimated time for the draft model to evaluate `tokens` it has not seen."""
        if tokens <= 2:
            return 0.0  # the usual one or two: part of every draft round's cost
        per_token = self.catchup_token_ms
        if per_token is None:
            # Before measuring: a batched catch-up costs a fraction of decoding token by token.
            per_token = 0.3 * (self.draft_token_ms or 0.0)
        return per_token * tokens

    def _shape(self, n: int) -> float:
        return 1.0 + self.slope * (n - 1)

    def target_ms(self, n: int) -> float | None:
        """Estimated time of a target pass over n tokens (None before any measurement)."""
        if n in self.batch_ms:
            return self.batch_ms[n]
        if not self.batch_ms:
            return None
        below = [m for m in self.batch_ms if m < n]
        above = [m for m in self.batch_ms if m > n]
        if below and above:
            lo, hi = max(below), min(above)
            t_lo, t_hi = self.batch_ms[lo], self.batch_ms[hi]
            return t_lo + (t_hi - t_lo) * (n - lo) / (hi - lo)
        if below and len(self.batch_ms) > 1:
            # Beyond the largest size measured: go on at the cost per extra row seen over its
            # upper half (a batch's cost per row only falls with its size, so this errs high).
            hi = max(below)
            lo = max([m for m in below if m <= hi // 2] or [min(below)])
            per_row = max(0.0, (self.batch_ms[hi] - self.batch_ms[lo]) / (hi - lo))
            return self.batch_ms[hi] + per_row * (n - hi)
        anchor = max(below) if below else min(above)
        return self.batch_ms[anchor] * self._shape(n) / self._shape(anchor)


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


class FixedPolicy:
    """Exactly the mode and K the user asked for."""

    def choose(
        self,
        mode: DraftMode,
        k: int,
        *,
        lookup_len: int,
        match_len: int,
        has_draft: bool,
        draft_lag: int = 0,
    ) -> PolicyChoice:
        if mode == DraftMode.PLAIN or k <= 0:
            return PolicyChoice(DraftMode.PLAIN, 0, "plain decoding")
        label = {
            DraftMode.LOOKUP: "lookup",
            DraftMode.DRAFT: "draft model",
            DraftMode.CHAIN: "chain",
        }[mode]
        return PolicyChoice(mode, k, f"{label}, K = {k} (fixed)")

    def observe(
        self,
        choice: PolicyChoice,
        *,
        batch: int,
        verify_ms: float,
        draft_ms: float,
        drafted: int,
        accepted: int,
        match_len: int,
        catchup: int = 0,
        catchup_ms: float = 0.0,
    ) -> None:
        """Fixed K learns nothing."""


class AutoPolicy:
    """Chooses plain, lookup or the draft model and K each round to maximise tokens per second.

    Prices each option as expected tokens ÷ expected time, from the measured cost of target
    passes by batch size, the draft model's cost per token, and acceptance rates estimated
    per drafter (for lookup, per match length). A drafter that does not pay is not used.
    Lookup's proposals cost nothing, so they are scored against the text at every position
    (LookupLedger) whether drafted or not; the draft model is probed with K = 1 now and then,
    at intervals that double while probes fail, so a stretch where it starts to pay is found
    without paying much where it never does.

    Attributes:
        costs: the fitted cost model.
        draft_acceptance: acceptance of the draft model.
        lookup_acceptance: acceptance of prompt lookup per match-length bucket.
    """

    def __init__(self, *, gpu: bool = False, probe_interval: int = 32) -> None:
        self.costs = CostModel(PRIOR_BATCH_SLOPE["gpu" if gpu else "cpu"])
        # Priors: a same-family draft model usually agrees more often than not; lookup
        # matches predict better the longer they are, and copied runs tend to continue.
        self.draft_acceptance = _Acceptance.prior(0.6, 0.6)
        self.lookup_acceptance = [
            _LookupSurvival(first, continued)
            for first, continued in zip(LOOKUP_PRIOR_FIRST, LOOKUP_PRIOR_CONTINUED, strict=True)
        ]
        self.ledger = LookupLedger()
        self._text_len = 0
        self.calibrated = False
        self.base_probe_interval = probe_interval
        # Only the draft model is probed: lookup's proposals are scored at every position.
        self._probe_interval = {DraftMode.DRAFT: probe_interval}
        self._since_used = {DraftMode.DRAFT: 0}
        self._probing: DraftMode | None = None

    @staticmethod
    def _bucket(match_len: int) -> int:
        return max(0, bisect.bisect_right(LOOKUP_EXTENTS, match_len) - 1)

    def _rate(
        self,
        tokens: float,
        k: int,
        per_draft_ms: float,
        fallback_ms: float,
        extra_ms: float = 0.0,
    ) -> float:
        """Expected tokens per millisecond for a round of k drafts yielding `tokens` on average."""
        target = self.costs.target_ms(k + 1) or fallback_ms * self.costs._shape(k + 1)
        return tokens / (target + per_draft_ms * k + extra_ms)

    def _draft_token_ms(self, plain_ms: float) -> float:
        per_token = self.costs.draft_token_ms
        # Before any measurement, a draft model is typically a third of the target's cost.
        return plain_ms / 3.0 if per_token is None else per_token

    def could_pay(self, mode: DraftMode, *, max_k: int = MAX_K, lag: int = 0) -> bool:
        """Whether `mode` would beat plain at perfect acceptance (α = 1) for some K ≤ max_k.

        A probe can only reveal a better acceptance rate, never cheaper passes, so a drafter
        that loses even at α = 1 on the measured costs is not worth probing (nor, for the
        draft model, worth evaluating the prompt for). `lag` prices a draft catch-up; a probe
        only pays it once, so it is spread over the rounds until the next probe.
        """
        plain_ms = self.costs.target_ms(1)
        if plain_ms is None:
            return True
        per_token = 0.0 if mode == DraftMode.LOOKUP else self._draft_token_ms(plain_ms)
        extra = 0.0
        if mode == DraftMode.DRAFT and lag:
            extra = self.costs.catchup_ms(lag) / max(1, self._probe_interval[DraftMode.DRAFT])
        best = max(
            self._rate(kk + 1.0, kk, per_token, plain_ms, extra) for kk in range(1, max_k + 1)
        )
        return best > 1.0 / plain_ms

    def _draft_pays(self) -> bool:
        """Whether the current estimates would choose the draft model over plain."""
        plain_ms = self.costs.target_ms(1)
        if plain_ms is None:
            return True
        acceptance, per_token = self.draft_acceptance, self._draft_token_ms(plain_ms)
        best = max(
            self._rate(acceptance.expected(kk), kk, per_token, plain_ms)
            for kk in range(1, MAX_K + 1)
        )
        return best > (1.0 + HURDLE) / plain_ms

    def choose(
        self,
        mode: DraftMode,
        k: int,
        *,
        lookup_len: int,
        match_len: int,
        has_draft: bool,
        draft_lag: int = 0,
    ) -> PolicyChoice:
        """The best option for the next round.

        `draft_lag` is how many tokens of the text the draft model has not evaluated yet: using
        it now pays that catch-up first, so a long-idle draft model must earn it back.
        """
        plain_ms = self.costs.target_ms(1)
        if plain_ms is None:
            # Nothing measured yet: one plain round gives the reference cost.
            return PolicyChoice(DraftMode.PLAIN, 0, "plain: measuring the target's cost")
        plain_rate = 1.0 / plain_ms
        best = PolicyChoice(DraftMode.PLAIN, 0, "")
        # Drafting must promise a clear gain: its estimates are noisy, plain's cost is known.
        best_rate = plain_rate * (1.0 + HURDLE)
        notes: list[str] = []
        if lookup_len > 0:
            acceptance = self.lookup_acceptance[self._bucket(match_len)]
            alpha = acceptance.alpha
            curve = acceptance.expected_curve(min(lookup_len, MAX_LOOKUP_K))
            lookup_best = max(
                range(1, len(curve)), key=lambda kk: self._rate(curve[kk], kk, 0.0, plain_ms)
            )
            rate = self._rate(curve[lookup_best], lookup_best, 0.0, plain_ms)
            notes.append(f"lookup {rate / plain_rate:.2f}×")
            if rate > best_rate:
                best_rate = rate
                best = PolicyChoice(
                    DraftMode.LOOKUP,
                    lookup_best,
                    f"lookup, K = {lookup_best}: {match_len}-token match, "
                    f"α ≈ {alpha:.2f}, ≈ {rate / plain_rate:.2f}× plain",
                )
        if has_draft:
            drafting = self.draft_acceptance
            alpha = drafting.alpha
            per_token = self._draft_token_ms(plain_ms)
            lag_ms = self.costs.catchup_ms(draft_lag)
            draft_best = max(
                range(1, MAX_K + 1),
                key=lambda kk: self._rate(drafting.expected(kk), kk, per_token, plain_ms, lag_ms),
            )
            rate = self._rate(
                drafting.expected(draft_best), draft_best, per_token, plain_ms, lag_ms
            )
            notes.append(f"draft {rate / plain_rate:.2f}×")
            if rate > best_rate:
                best_rate = rate
                best = PolicyChoice(
                    DraftMode.DRAFT,
                    draft_best,
                    f"draft model, K = {draft_best}: α ≈ {alpha:.2f}, "
                    f"≈ {rate / plain_rate:.2f}× plain",
                )
        if best.mode == DraftMode.PLAIN:
            # Lookup needs no probes: the ledger scores its proposals at every position.
            if (
                has_draft
                and self._since_used[DraftMode.DRAFT] >= self._probe_interval[DraftMode.DRAFT]
                and self.could_pay(DraftMode.DRAFT, lag=draft_lag)
                and self._probe_affordable(DraftMode.DRAFT, draft_lag, plain_ms)
            ):
                self._probing = DraftMode.DRAFT
                return PolicyChoice(
                    DraftMode.DRAFT, 1, "draft model, K = 1: probing whether it pays now"
                )
            if not notes:
                return PolicyChoice(DraftMode.PLAIN, 0, "plain: nothing to draft from")
            return PolicyChoice(
                DraftMode.PLAIN,
                0,
                f"plain: drafting would not pay ({', '.join(notes)}; needs {1.0 + HURDLE:.2f}×)",
            )
        return best

    def _probe_affordable(self, mode: DraftMode, lag: int, plain_ms: float) -> bool:
        """Whether a K = 1 probe's extra cost fits the probing budget.

        A draft-model probe after a long pause first evaluates everything written since
        (≈ 0.5 s for 150 tokens of a 0.5B model on a laptop CPU); that is what keeps it from
        being worth a probe there, while on a GPU the same catch-up takes milliseconds.
        """
        extra = (self.costs.target_ms(2) or plain_ms * self.costs._shape(2)) - plain_ms
        if mode == DraftMode.DRAFT:
            extra += self._draft_token_ms(plain_ms) + self.costs.catchup_ms(lag)
        return extra <= PROBE_BUDGET * self._probe_interval[mode] * plain_ms

    def start_text(self, length: int) -> None:
        """A new answer starts after `length` tokens of prompt.

        Pending proposals are void, and lookup's acceptance starts again from its priors:
        how copies fared in another answer (a code edit before an explanation) predicts
        little for this one, and the ledger relearns within a few dozen tokens.
        """
        self.ledger.clear()
        self._text_len = length
        for acceptance in self.lookup_acceptance:
            acceptance.forget()

    def note_lookup(self, position: int, proposal: Sequence[int], match_len: int) -> None:
        """Record lookup's proposal for the text from `position` on, drafted or not."""
        self.ledger.note(position, proposal, match_len)

    def settle_lookup(self, text: Sequence[int]) -> None:
        """Learn lookup's acceptance from every proposal the text has now decided.

        Memory is counted in tokens of text (about the last hundred), not in scores: the
        proposals made at neighbouring positions overlap and are scored many times over.
        """
        grown = len(text) - self._text_len if len(text) > self._text_len else 0
        self._text_len = len(text)
        if grown:
            for acceptance in self.lookup_acceptance:
                acceptance.age(grown)
        for match_len, before, kept, refused in self.ledger.settle(text):
            self.lookup_acceptance[self._bucket(match_len)].score(before, kept, refused)

    def observe(
        self,
        choice: PolicyChoice,
        *,
        batch: int,
        verify_ms: float,
        draft_ms: float,
        drafted: int,
        accepted: int,
        match_len: int,
        catchup: int = 0,
        catchup_ms: float = 0.0,
    ) -> None:
        """Learn from one round; `catchup` tokens of the draft's time were a catch-up."""
        self.costs.observe_batch(batch, verify_ms)
        for mode in self._since_used:
            self._since_used[mode] += 1
        if choice.mode == DraftMode.DRAFT and drafted:
            self.draft_acceptance.update(drafted, accepted)
            # The first decode of a round evaluates one or two tokens as well as drafting the
            # first token: only a longer catch-up is priced on its own.
            if catchup > 2:
                self.costs.observe_catchup(catchup, catchup_ms)
                self.costs.observe_draft(drafted, draft_ms - catchup_ms)
            else:
                self.costs.observe_draft(drafted, draft_ms)
        if choice.mode in self._since_used and drafted:
            self._since_used[choice.mode] = 0
            if self._probing == choice.mode:
                # A probe succeeds when what it taught makes the drafter worth choosing; one
                # whose token was kept but that leaves plain ahead failed all the same (each
                # draft-model probe pays a catch-up over every token since the last one).
                interval = self._probe_interval[choice.mode]
                succeeded = accepted > 0 and self._draft_pays()
                self._probe_interval[choice.mode] = (
                    self.base_probe_interval if succeeded else min(interval * 2, 1024)
                )
        self._probing = None
