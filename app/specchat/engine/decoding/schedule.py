"""Policies: a fixed drafter and K, or `auto`, which prices every drafter on offer each round."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

from specchat.engine.costs.machine import MachineCosts
from specchat.engine.costs.priors import (
    CATCHUP_ROUNDS,
    HURDLE,
    MAX_K,
    MAX_LOOKUP_K,
    PROBE_BUDGET,
    REFERENCE_ROUNDS,
    SCORED_HURDLE,
)
from specchat.engine.costs.table import CostTable
from specchat.engine.decoding.pricer import Pricer, RoundContext
from specchat.engine.drafting.base import Offer
from specchat.engine.drafting.registry import PLAIN, mode_info
from specchat.engine.types import PolicyChoice

__all__ = [
    "HURDLE",
    "MAX_K",
    "MAX_LOOKUP_K",
    "PROBE_BUDGET",
    "PROBING",
    "REFERENCE_ROUNDS",
    "SCORED_HURDLE",
    "AutoPolicy",
    "FixedPolicy",
    "is_probe",
]


#: How a probe's reason ends: the replay's loss ledger reads a round as a probe by it.
PROBING = "probing whether it pays now"


#: A round priced at the cost table's own depth, with no budget known: where a caller names
#: no round (tests, tools pricing one offer).
_ANYWHERE = RoundContext()


def is_probe(choice: PolicyChoice) -> bool:
    """Whether `auto` made this choice to probe a drafter (K = 1 now and then)."""
    return choice.reason.endswith(PROBING)


def _probe_token_ms(offer: Offer) -> float:
    """The drafted token's price a probe of `offer`'s drafter is judged by."""
    return offer.token_ms if offer.probe_token_ms is None else offer.probe_token_ms


@functools.cache
def _short(name: str) -> str:
    """A drafter's label inside a sentence ("draft model"): kept, since every round words
    its reason with it and looking it up walks the registry."""
    try:
        return mode_info(name).label.lower()
    except KeyError:
        return name


class FixedPolicy:
    """Exactly the mode and K the user asked for.

    Attributes:
        longest: the longest draft it asks for.
    """

    longest = MAX_K

    def choose(self, mode: str, k: int) -> PolicyChoice:
        if mode == PLAIN or k <= 0:
            return PolicyChoice(PLAIN, 0, "plain decoding")
        return PolicyChoice(mode, k, f"{_short(mode)}, K = {k} (fixed)")

    def observe(
        self,
        choice: PolicyChoice,
        *,
        batch: int,
        verify_ms: float,
        drafted: int,
        accepted: int,
        at: RoundContext | None = None,
    ) -> None:
        """Fixed K learns nothing (the drafters still learn on their own)."""


class AutoPolicy:
    """Chooses plain or a drafter and K each round to maximise tokens per second.

    An argmax over the drafters' offers: each offer is priced as expected tokens ÷ expected
    time, with the target pass's cost (its Pricer: the machine's measured table at the
    round's depth, the cheapest pass holding n rows, and a recurrent target's rollback) and
    the drafter's own costs and acceptance curve, all from the offer; the best one that
    beats plain by its hurdle is taken. Whoever runs the rounds hands each call that prices
    one a RoundContext (the cache's depth, the answer's budget); the policy keeps none of
    it. An offer marked `probed` (acceptance learnt only from rounds that use it) is tried
    with K = 1 now and then, at intervals that double while probes fail, so a stretch where
    it starts to pay is found without paying much where it never does.

    Attributes:
        pricer: prices the target's part of a round (its `costs`: the machine's cost table,
            measured outside answers, refreshed by rounds).
        longest: the longest draft it may ask for.
        base_probe_interval: rounds between probes after one that succeeded.
    """

    longest = MAX_LOOKUP_K

    def __init__(
        self, *, gpu: bool = False, costs: MachineCosts | None = None, probe_interval: int = 32
    ) -> None:
        # Without a stored table: priors until rounds (and the background measurement) teach.
        self.pricer = Pricer(
            costs or MachineCosts(CostTable(gpu=gpu)), limit=max(self.longest, MAX_K) + 1
        )
        self.base_probe_interval = probe_interval
        self._probe_interval: dict[str, int] = {}
        self._since_used: dict[str, int] = {}
        self._probing: str | None = None
        self._settling: str | None = None  # a probe whose kept token the next offer weighs
        self._answer_rounds = 0  # rounds of the answer under way
        self._since_plain = 0  # rounds since one token was timed
        self._rounds = 0  # rounds seen: a probed drafter first offered now was never used

    def begin_answer(self) -> None:
        """A new answer starts: the probing budget of its own begins at nothing."""
        self._answer_rounds = 0

    @property
    def costs(self) -> MachineCosts:
        """The machine's cost tables its pricer prices with."""
        return self.pricer.costs

    @costs.setter
    def costs(self, costs: MachineCosts) -> None:
        self.pricer.costs = costs

    def prices(self, at: RoundContext | None = None) -> list[float] | None:
        """The target's time to check n tokens, by n up to the longest pass a round may make
        (index 1 is plain's token), at the round `at` (None: at the table's own depth); None
        before anything is measured (see Pricer.prices)."""
        return self.pricer.prices(at or _ANYWHERE)

    def pass_size(self, n: int, at: RoundContext) -> int:
        """Rows of the pass that checks n tokens in the round `at` (see Pricer.pass_size)."""
        return self.pricer.pass_size(n, at)

    @staticmethod
    def _rate(
        tokens: float,
        k: int,
        per_draft_ms: float,
        prices: Sequence[float],
        extra_ms: float = 0.0,
    ) -> float:
        """Expected tokens per millisecond for a round of k drafts yielding `tokens` on average,
        with `prices` from prices()."""
        return tokens / (prices[k + 1] + per_draft_ms * k + extra_ms)

    @staticmethod
    def best_k(
        offer: Offer, prices: Sequence[float], budget: int | None = None
    ) -> tuple[int, float]:
        """The K (the first of equals) at which `offer` drafts fastest, and its rate: a plain
        loop, since it runs for every K of every offer each round. Its one-off cost is
        spread over CATCHUP_ROUNDS, or over the rounds of that K the answer's `budget`
        (tokens it may still write) leaves room for, if fewer."""
        per_token = offer.token_ms
        best_k, best = 1, -1.0
        for kk in range(1, offer.k_max + 1):
            tokens = offer.curve[kk]
            rounds = float(CATCHUP_ROUNDS)
            if budget is not None and offer.extra_ms:
                rounds = min(rounds, max(1.0, budget / tokens))
            extra = offer.round_ms + offer.extra_ms / rounds
            rate = AutoPolicy._rate(tokens, kk, per_token, prices, extra)
            if rate > best:
                best_k, best = kk, rate
        return best_k, best

    def could_pay(
        self, offer: Offer, *, max_k: int = MAX_K, prices: Sequence[float] | None = None
    ) -> bool:
        """Whether `offer` would beat plain at perfect acceptance (α = 1) for some K ≤ max_k.

        A probe can only reveal a better acceptance rate, never cheaper passes, so a drafter
        that loses even at α = 1 on the measured costs is not worth probing (nor, for the
        draft model, worth evaluating the prompt for). Its one-off cost is spread over the
        rounds until the next probe, since a probe only pays it once. Its drafted token is
        priced as a probe judges it (`Offer.probe_token_ms`): a price stored stalled keeps no
        drafter from the probe that would time it again. `prices`: the round's, if the
        caller has them.
        """
        prices = prices or self.prices()
        if prices is None:
            return True
        plain_ms = prices[1]
        # A probed drafter's probes come every interval (the base one before its first).
        unseen = self.base_probe_interval if offer.probed else 1
        interval = max(1, self._probe_interval.get(offer.source, unseen))
        extra = offer.round_ms + (offer.extra_ms / interval if offer.extra_ms else 0.0)
        best = max(
            self._rate(kk + 1.0, kk, _probe_token_ms(offer), prices, extra)
            for kk in range(1, max_k + 1)
        )
        return best > 1.0 / plain_ms

    def worth_readying(
        self, offer: Offer, at: RoundContext | None = None, *, rivals: Sequence[Offer] = ()
    ) -> bool:
        """Whether to ready the drafter of `offer` (made for the prompt) before an answer's
        first token: only where the current estimates would choose it for the first round,
        over plain and over every one of `rivals` (offers of drafters that need nothing read:
        a request's prediction, a copy), as choose() compares them. Before the target's cost
        is measured nothing is chosen (the first round is plain); a drafter that starts to
        pay later catches up then, its catch-up priced like any other.

        Readying costs the offer's one-off part (the draft model reading a prompt it has not
        seen): that read must also be one it could repay at all (`could_pay`, as for a
        probe), else the first token waits for nothing. `at`: where the answer's first
        round is priced.
        """
        at = at or _ANYWHERE
        prices = self.prices(at)
        if prices is None or self.pricer.target_ms(1, at) is None:
            return False
        if offer.extra_ms and not self.could_pay(offer, prices=prices):
            return False
        own = self._in_step_rate(offer, prices) / (1.0 + offer.hurdle)
        if own <= 1.0 / prices[1]:  # plain would be chosen over it (as `_pays` judges)
            return False
        return all(
            self.best_k(rival, prices, at.budget)[1] / (1.0 + rival.hurdle) < own
            for rival in self.pricer.with_rollback(rivals, prices, at)
        )

    def _pays(self, offer: Offer, prices: Sequence[float]) -> bool:
        """Whether the current estimates would choose `offer` over plain (at any K it offers,
        its one-off cost aside)."""
        return self._in_step_rate(offer, prices) > (1.0 + offer.hurdle) / prices[1]

    def _in_step_rate(self, offer: Offer, prices: Sequence[float]) -> float:
        """The best rate `offer` promises at any K it offers, its one-off cost aside (a
        drafter in step with the text: nothing to catch up)."""
        return max(
            self._rate(offer.curve[kk], kk, offer.token_ms, prices, offer.round_ms)
            for kk in range(1, offer.k_max + 1)
        )

    def choose(
        self,
        offers: Sequence[Offer],
        prices: Sequence[float] | None = None,
        at: RoundContext | None = None,
    ) -> PolicyChoice:
        """The best option for the next round `at` (None: at the table's own depth, no budget
        known), among the drafters' offers (in their order), each priced with the rollback
        it would cost the target; `prices`: the round's (see prices()), if the caller has
        them."""
        at = at or _ANYWHERE
        prices = prices or self.prices(at)
        offers = self.pricer.with_rollback(offers, prices, at)
        for offer in offers:
            if offer.probed:
                self._since_used.setdefault(offer.source, self._rounds)
                self._probe_interval.setdefault(offer.source, self.base_probe_interval)
                if offer.source == self._settling:
                    self._settle(offer, prices)
        self._settling = None
        if prices is None:
            # Nothing measured yet: one plain round gives the reference cost.
            return PolicyChoice(PLAIN, 0, "plain: measuring the target's cost")
        if self._since_plain >= REFERENCE_ROUNDS or self.costs.target.one_token_read:
            return PolicyChoice(PLAIN, 0, "plain: timing one token, which every price scales")
        plain_rate = 1.0 / prices[1]
        best = PolicyChoice(PLAIN, 0, "")
        # Drafting must promise a clear gain: its estimates are noisy, plain's cost is known.
        # Offers compare by their rate discounted by their hurdle.
        best_score = plain_rate
        notes: list[str] = []
        for offer in offers:
            name = _short(offer.source)
            k, rate = self.best_k(offer, prices, at.budget)
            needs = 1.0 + offer.hurdle
            speed = rate / plain_rate
            # Rounded away from the bar, so that the words never contradict the choice.
            below = math.floor(speed * 100) / 100
            notes.append(f"{name} {below:.2f}×, below the {needs:.2f}× it needs")
            if rate / needs > best_score:
                best_score = rate / needs
                # A drafter that sizes its own draft is priced at its best fixed K and
                # asked for as many as it finds worth drafting.
                asked = offer.k_max if offer.sizes_itself else k
                length = f"K ≤ {asked} (≈ {k} priced)" if asked != k else f"K = {k}"
                best = PolicyChoice(
                    offer.source,
                    asked,
                    f"{name}, {length}: {offer.detail}, "
                    f"≈ {math.ceil(speed * 100) / 100:.2f}× plain (it needs {needs:.2f}×)",
                )
        if best.mode != PLAIN:
            return best
        for offer in offers:
            if offer.probed and self._probe_due(offer, prices):
                self._probing = offer.source
                return PolicyChoice(offer.source, 1, f"{_short(offer.source)}, K = 1: {PROBING}")
        if not notes:
            return PolicyChoice(PLAIN, 0, "plain: nothing to draft from")
        return PolicyChoice(PLAIN, 0, f"plain: no drafter expected to pay ({', '.join(notes)})")

    def _settle(self, offer: Offer, prices: Sequence[float] | None) -> None:
        """A probe whose token was kept succeeds when what it taught (the drafter's offer
        now) makes the drafter worth choosing; one that leaves plain ahead failed all the
        same (each draft-model probe pays a catch-up over every token since the last one)."""
        if prices is None or self._pays(offer, prices):
            self._probe_interval[offer.source] = self.base_probe_interval
        else:
            self._probe_failed(offer.source)

    def _probe_failed(self, name: str) -> None:
        """Probe `name` half as often from now on (at most every 1024 rounds)."""
        self._probe_interval[name] = min(self._probe_interval[name] * 2, 1024)

    def _probe_due(self, offer: Offer, prices: Sequence[float]) -> bool:
        """Whether to probe the drafter of `offer` now: its turn has come, it could pay at
        all, and the probe's extra cost fits the probing budget.

        A draft-model probe after a long pause first evaluates everything written since
        (≈ 0.5 s for 150 tokens of a 0.5B model on a laptop CPU); that is what keeps it from
        being worth a probe there, while on a GPU the same catch-up takes milliseconds.
        """
        name = offer.source
        interval = self._probe_interval[name]
        if self._since_used[name] < interval:
            return False
        if not self.could_pay(offer, prices=prices):
            return False
        plain_ms = prices[1]
        if offer.extra_ms > PROBE_BUDGET * self._answer_rounds * plain_ms:
            return False
        extra = prices[2] - plain_ms + _probe_token_ms(offer) + offer.round_ms + offer.extra_ms
        return extra <= PROBE_BUDGET * interval * plain_ms

    def observe(
        self,
        choice: PolicyChoice,
        *,
        batch: int,
        verify_ms: float,
        drafted: int,
        accepted: int,
        at: RoundContext | None = None,
    ) -> None:
        """Learn the target's cost from one round (`at`: the round, as choose() had it), and
        settle a probe (one whose token was kept is weighed at the next offer of its
        drafter, which has learnt from it)."""
        self.pricer.observe(batch, verify_ms, at or _ANYWHERE)
        self._answer_rounds += 1
        self._rounds += 1
        self._since_plain = 0 if batch == 1 else self._since_plain + 1
        for name in self._since_used:
            self._since_used[name] += 1
        if choice.mode in self._since_used and drafted:
            self._since_used[choice.mode] = 0
            if self._probing == choice.mode:
                if accepted > 0:
                    self._settling = choice.mode
                else:
                    self._probe_failed(choice.mode)
        self._probing = None
