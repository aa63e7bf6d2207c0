"""The draft model: a small model sharing the target's vocabulary drafts token by token."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from specchat.engine.costs.machine import MachineCosts, estimate_catchup_ms
from specchat.engine.costs.priors import (
    DRAFT_MODEL_PRIOR,
    HURDLE,
    MAX_K,
    MIN_CONFIDENCE,
    PRIOR_WEIGHT,
    UNMEASURED_DRAFT_SHARE,
)
from specchat.engine.costs.table import DRAFT_SIZES, FIRST_PASS_ROWS, CostTable
from specchat.engine.drafting.base import (
    Acceptance,
    Draft,
    Drafter,
    LearntEstimate,
    Listing,
    LoadedPair,
    Offer,
    Outcome,
    expected_tokens,
)
from specchat.engine.drafting.draft_model.draft_length import DraftLength, RoundRate
from specchat.engine.drafting.draft_model.draft_model_column import DraftModelColumn
from specchat.engine.drafting.draft_model.model_acceptance import (
    ConfidenceCalibration,
    TextAcceptance,
)
from specchat.engine.drafting.registry import register
from specchat.engine.sampling import probabilities, sample, token_probability
from specchat.engine.types import SamplingParams

if TYPE_CHECKING:
    from specchat.engine.llamacpp.target import DraftModel

#: How a calibration's way of sampling is named where it is stored.
_WAY = {True: "greedy", False: "sampled"}


@dataclass(frozen=True)
class ModelDraft(Draft):
    """The draft model's draft.

    Attributes:
        catchup: context tokens it had to evaluate before drafting (1–2 normally; the whole
            prompt the first time).
        catchup_ms: the part of `ms` spent on that catch-up.
        decodes: the model's passes, the catch-up's included (more than the tokens where a
            stop refused the last one it evaluated, or the draft was cut back).
        confidences: its top probability at each drafted token (how sure it was).
        check_ms: the target's price for checking it, where the machine's prices sized it
            (None otherwise).
        asked: the longest draft it was asked for (1: a probe).
    """

    catchup: int = 0
    catchup_ms: float = 0.0
    decodes: int = 0
    confidences: tuple[float, ...] = ()
    check_ms: float | None = None
    asked: int = 0


@register
class DraftModelDrafter(Drafter):
    """Draft with a small model sharing the target's vocabulary.

    Its KV cache is kept in step with the accepted text: each proposal first syncs the cache
    to the context (reusing the common prefix, so only the last round's correction is new),
    then decodes one token at a time. Greedy settings draft the argmax; otherwise tokens are
    sampled from q, the draft's distribution under the same sampling settings, and q is
    returned for rejection sampling. It times itself: per drafted token, and per token of a
    catch-up (text written while it was not used, evaluated in one batch).

    On a machine whose costs it knows, a draft of up to K ends where going on stops paying
    (DraftLength: by how sure it is of each token, at the target's prices), under `auto` and a
    fixed K alike; K is the longest it may draft.

    Attributes:
        model: the draft model.
        min_confidence: without the machine's costs, stop drafting once the draft's top
            probability falls below this (0 disables); low confidence predicts rejection,
            and each extra token costs.
        confidence: how often a drafted token is kept by how sure it was (greedy, sampled).
        table: its cost table (one size: a drafted token), measured outside answers.
        draft_token_ms: milliseconds per drafted token (None before any measurement).
        catchup_token_ms: smoothed milliseconds per token of a catch-up.
        smoothing: weight of each new timing.
        rounds: the rate its rounds sized by prices made, which sizes the next (DraftLength).
        sized: the same for the rounds that asked it for more than one token (probes apart),
            which its offer is held to (see _held_to_rounds). Both are stored with its
            estimates, so a fresh window or server starts from what the last one's rounds made.
    """

    name = "draft"
    listing = Listing(
        label="Draft model", priority=20, needs_model=True, columns=(DraftModelColumn,)
    )

    def __init__(
        self,
        model: DraftModel,
        *,
        min_confidence: float = MIN_CONFIDENCE,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        super().__init__()
        self.model = model
        self.min_confidence = min_confidence
        self._clock = clock
        self._acceptance: Acceptance = TextAcceptance(*DRAFT_MODEL_PRIOR)
        # How often a drafted token is kept by how sure it was, greedy or sampled.
        self.confidence = {True: ConfidenceCalibration(), False: ConfidenceCalibration()}
        # The machine's costs, which size each draft (see DraftLength); None: not known,
        # and the confidence stop alone ends a draft.
        self._costs: MachineCosts | None = None
        # Its time per token and per first pass of two rows, refreshed by every round it
        # drafts (see create).
        self.table = CostTable(sizes=DRAFT_SIZES)
        self.catchup_token_ms: float | None = None
        self.smoothing = 0.2
        self.rounds = RoundRate()
        self.sized = RoundRate()

    @classmethod
    def create(cls, pair: LoadedPair, built: Mapping[str, Drafter]) -> Drafter | None:
        if pair.draft is None:
            return None
        drafter = cls(pair.draft, clock=pair.clock)
        drafter._ends_answer = pair.ends_answer
        if pair.costs is not None:
            if pair.costs.draft is not None:
                # The stored table the background measurement fills is the one it prices with.
                drafter.table = pair.costs.draft
            drafter.catchup_token_ms = pair.costs.catchup_token_ms
            drafter._costs = pair.costs
        return drafter

    # --- the protocol --------------------------------------------------------------------
    def ready(self, prompt: Sequence[int]) -> None:
        """Evaluate the prompt now (only when likely to draft: on a CPU `auto` rarely uses
        the draft model, and its prompt evaluation would be paid for nothing)."""
        cached = self.model.sync(prompt[:-1])
        if cached < len(prompt) - 1:
            self.model.decode(prompt[cached:-1], logits="none")

    def propose(
        self,
        context: Sequence[int],
        k: int,
        sampling: SamplingParams,
        rng: np.random.Generator,
    ) -> ModelDraft:
        clock = self._clock
        began = clock()
        model = self.model
        k = min(k, model.n_ctx - len(context))
        if k <= 0:
            return ModelDraft((), None if sampling.greedy else (), 0.0, self.name)
        cached = model.sync(context)
        if cached == len(context):
            # The whole context is cached but its last logits are gone: re-evaluate it.
            model.truncate(cached - 1)
            cached -= 1
        catchup = len(context) - cached
        logits = model.decode(context[cached:], logits="last")[0]
        # The drafted tokens are dropped again next round, over several decode calls.
        model.mark()
        catchup_ms = (clock() - began) * 1000.0
        tokens: list[int] = []
        qs: list[np.ndarray] = []
        sure: list[float] = []
        # The target's cache holds the context less its last token (the round loop's rule).
        length = self._length(k, len(context) - 1)
        calibration = self.confidence[sampling.greedy]
        decodes = 1
        for i in range(k):
            if sampling.greedy:
                token = int(np.argmax(logits))
                confidence = token_probability(logits, token)
            else:
                q = probabilities(logits, sampling)
                token = sample(q, rng)
                confidence = float(q.max())
            unsure = i > 0 and confidence < self.min_confidence
            if length is None and unsure:
                break  # without prices, the fixed confidence stop
            if not sampling.greedy:
                qs.append(q)
            tokens.append(token)
            sure.append(confidence)
            if self._ends_answer(token):
                break  # nothing after the answer's end can be kept
            if length is not None:
                length.add(calibration.kept_rate(confidence), calibration.next_rate(confidence))
                if not length.goes_on(k):
                    break
            if i + 1 < k:
                logits = model.decode([token], logits="last")[0]
                decodes += 1
        if length is not None and sampling.greedy:
            # Drafting is paid; rows are not: check only the prefix worth its rows. Only at
            # T = 0: the best prefix weighs later tokens' confidence, which depends on the
            # tokens sampled before them, and whether a sampled token is checked must not
            # depend on which token was sampled, or the output would no longer follow the
            # target's distribution. (Where to stop drafting depends on the confidences
            # before the next token only, and holds at any temperature.)
            keep = length.best_length()
            tokens, sure, qs = tokens[:keep], sure[:keep], qs[:keep]
        check_ms = None if length is None else length.prices[len(tokens) + 1]
        ms = (clock() - began) * 1000.0
        probs = None if sampling.greedy else tuple(qs)
        return ModelDraft(
            tuple(tokens),
            probs,
            ms,
            self.name,
            catchup=catchup,
            catchup_ms=catchup_ms,
            decodes=decodes,
            confidences=tuple(sure),
            check_ms=check_ms,
            asked=k,
        )

    def _length(self, k: int, depth: int) -> DraftLength | None:
        """What ends a draft of up to k tokens where going on stops paying, on the machine's
        prices at the target cache's `depth` (None before any: the confidence stop ends it)."""
        prices = None if self._costs is None else self._costs.target.price_list(k + 1, depth)
        if prices is None:
            return None
        token_ms, _ = self.table.drafted_token_ms(prices[1], UNMEASURED_DRAFT_SHARE)
        return DraftLength(prices, token_ms, self._acceptance.continued, self.rounds.rate)

    def observe(self, outcome: Outcome) -> None:
        draft = outcome.draft
        mine = draft.source == self.name and isinstance(draft, ModelDraft)
        drafted = len(draft.tokens) if mine else 0
        acceptance = self._acceptance
        greedy = outcome.sampling is None or outcome.sampling.greedy
        if isinstance(acceptance, TextAcceptance):
            acceptance.learn(outcome.margins, drafted, outcome.accepted, greedy=greedy)
        elif drafted:  # an estimate set by hand learns from its own rounds only
            acceptance.update(drafted, outcome.accepted)
        if not drafted or not isinstance(draft, ModelDraft):
            self.sized.age()  # text written without it: what its rounds made says less
            return
        if draft.confidences:
            self.confidence[greedy].learn(draft.confidences, outcome.accepted)
        if draft.check_ms is not None:
            # A long catch-up is paid once, not by the rounds that follow.
            one_off = draft.catchup_ms if draft.catchup > FIRST_PASS_ROWS else 0.0
            round_ms = draft.ms - one_off + draft.check_ms
            self.rounds.add(outcome.accepted + 1, round_ms)
            if draft.asked > 1:
                self.sized.add(outcome.accepted + 1, round_ms)
        # A drafted token's price is one pass of the model: a draft its confidence stop ended
        # made one pass more than it kept tokens, and charging that pass to the tokens would
        # price every later draft dearer by what only a stopped one pays. The first pass of
        # a round also reads what the last round left unread: one token it prices as a
        # drafted token's; two (a fully kept draft's last token and the target's own) are a
        # pass of two rows, priced as that size (charged to one drafted token, they priced
        # a token at a two-row pass after every fully kept draft, 17 ↔ 33 ms on the 0.5B,
        # and it settled at 40 ms); a longer catch-up is priced on its own. The passes after
        # it made the rest (none at K = 1: charging the remainder to one token taught a
        # drafted token costs 0 ms, and damped against 0 the estimate never rose again).
        if draft.catchup > FIRST_PASS_ROWS:
            self.observe_catchup(draft.catchup, draft.catchup_ms)
        elif draft.catchup == FIRST_PASS_ROWS:
            if 1 in self.table.pass_ms:  # a table's sizes are priced against its one row
                self.table.observe(FIRST_PASS_ROWS, draft.catchup_ms)
        else:
            self.observe_draft(draft.decodes, draft.ms)
            return
        self.observe_draft(draft.decodes - 1, draft.ms - draft.catchup_ms)

    def _estimates(self) -> dict[str, LearntEstimate]:
        found: dict[str, LearntEstimate] = {"acceptance": self._acceptance}
        if isinstance(self._acceptance, TextAcceptance):
            for greedy, calibration in self._acceptance.calibration.items():
                found[f"margins.{_WAY[greedy]}"] = calibration
        for greedy, confidence in self.confidence.items():
            found[f"confidence.{_WAY[greedy]}"] = confidence
        # Rates in ms: valid where the key names the same threads and backend, as it does.
        found["rounds"] = self.rounds
        found["sized"] = self.sized
        return found

    def offer(
        self, context: Sequence[int], k_cap: int, prices: Sequence[float] | None
    ) -> Offer | None:
        """Drafts of up to MAX_K, paying first for the text it has not seen: a long-idle
        draft model must earn its catch-up back. Its acceptance is learnt from every token
        written (see TextAcceptance), its calibration only from the rounds it drafts, so
        `auto` probes it. Priced by `auto`, it sizes its own draft (see DraftLength)."""
        k_max = min(MAX_K, k_cap)
        if k_max <= 0:
            return None
        lag = len(context) - self.model.cached_prefix(context)
        alpha, continued = self._acceptance.alpha, self._acceptance.continued
        plain_ms = None if prices is None else prices[1]
        token_ms, probe_token_ms = self.table.drafted_token_ms(plain_ms, UNMEASURED_DRAFT_SHARE)
        curve = [expected_tokens(alpha, k, continued) for k in range(k_max + 1)]
        round_ms = self._first_pass_extra_ms(lag)
        detail = f"α ≈ {alpha:.2f}"
        if prices is not None:
            held = self._held_to_rounds(curve, prices, token_ms, round_ms)
            if held < 1.0:
                curve = [curve[0], *(tokens * held for tokens in curve[1:])]
                made = (self.sized.rate or 0.0) * prices[1]
                detail += f", its rounds ≈ {made:.2f}× plain"
        return Offer(
            source=self.name,
            k_max=k_max,
            curve=curve,
            token_ms=token_ms,
            probe_token_ms=probe_token_ms,
            extra_ms=self.catchup_ms(lag),
            round_ms=round_ms,
            hurdle=HURDLE,
            probed=True,
            sizes_itself=self._costs is not None and prices is not None,
            detail=detail,
        )

    def _held_to_rounds(
        self, curve: Sequence[float], prices: Sequence[float], token_ms: float, round_ms: float
    ) -> float:
        """How far to scale the curve's drafts down to what the rounds it sized made (1: not
        at all). The curve prices every K as if each draft ran to it; the rounds end where
        its confidence dips (DraftLength), and on text the target finds easy but the draft
        model does not they make less than the curve's best rate. That best is held to the
        rate they made, the promise counting as PRIOR_WEIGHT rounds; never raised (a curve
        that undersells is probed and learnt as before). Rounds of other drafters age what
        they say, so the promise returns once the text has moved on."""
        achieved, weight = self.sized.rate, self.sized.weight
        if achieved is None or weight <= 0.0:
            return 1.0
        longest = min(len(curve) - 1, len(prices) - 2)
        promised = max(
            (curve[k] / (prices[k + 1] + token_ms * k + round_ms) for k in range(1, longest + 1)),
            default=0.0,
        )
        if promised <= 0.0:
            return 1.0
        held = (weight * achieved + PRIOR_WEIGHT * promised) / (weight + PRIOR_WEIGHT)
        return min(1.0, held / promised)

    def _first_pass_extra_ms(self, lag: int) -> float:
        """What the round's first pass costs beyond a drafted token's one-row pass, where it
        reads the two tokens a fully kept draft leaves unread (its last token and the
        target's own): a pass of two rows, at its own price (on a 2-core CPU the 0.5B draft
        model's costs 1.9 of its one-row passes). A longer catch-up is priced as such
        (catchup_ms); after a rejection the pass reads one token."""
        if lag != FIRST_PASS_ROWS:
            return 0.0
        one, two = self.table.cost_ms(1), self.table.cost_ms(FIRST_PASS_ROWS)
        return 0.0 if one is None or two is None else max(0.0, two - one)

    # --- timing --------------------------------------------------------------------------
    @property
    def draft_token_ms(self) -> float | None:
        return self.table.cost_ms(1)

    @draft_token_ms.setter
    def draft_token_ms(self, ms: float | None) -> None:
        self.table.scale = None
        if ms is None:
            self.table.pass_ms.pop(1, None)
        else:
            self.table.pass_ms[1] = ms

    def observe_draft(self, tokens: int, ms: float) -> None:
        if tokens > 0:
            self.table.observe(1, ms / tokens)

    def observe_catchup(self, tokens: int, ms: float) -> None:
        if tokens > 0:
            old, new = self.catchup_token_ms, ms / tokens
            self.catchup_token_ms = new if old is None else old + self.smoothing * (new - old)

    def catchup_ms(self, tokens: int) -> float:
        """Estimated time to evaluate `tokens` of text it has not seen."""
        return estimate_catchup_ms(tokens, self.catchup_token_ms, self.table)
