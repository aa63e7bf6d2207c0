"""What `auto` may still lose to drafting in the answer under way: its regret allowance."""

from __future__ import annotations

from collections.abc import Sequence

from specchat.engine.costs.priors import REGRET_SEED, REGRET_SHARE
from specchat.engine.drafting.base import Offer


class RegretAllowance:
    """Bounds what drafting can cost an answer against writing it plainly.

    Every estimate a drafter offers is a guess until its rounds confirm it, and a single
    round can lose many tokens' time (a long copy refused at its first token: five tokens'
    time on a CPU). So a copy may draft only as far as its worst case, every drafted token
    refused, weighted by how often its estimate says the first one is, fits what the answer
    can afford to lose: a small share of the plain time of what it has written, plus the
    seed, plus whatever drafting has won in it, less what drafting has lost. Drafting that
    pays earns itself longer drafts; a copy whose estimate proves wrong loses one round and
    then waits until the share of the plain time written has made the loss up. Where the
    cost table is right, drafting's losses in an answer stay within the seed, the share and
    one round's worst case, whatever the copies' estimates say.

    Attributes:
        share: the share of the answer's plain time drafting may lose.
        seed: what the answer may lose before it has written anything, in plain tokens: what
            lets the first rounds draft at all.
    """

    def __init__(self, *, share: float = REGRET_SHARE, seed: float = REGRET_SEED) -> None:
        self.share = share
        self.seed = seed
        self._written_ms = 0.0  # the plain time of the answer's tokens so far
        self._won_ms = 0.0  # drafting's gains less its losses in this answer, against plain

    def begin(self) -> None:
        """A new answer: nothing written, nothing won or lost."""
        self._written_ms = 0.0
        self._won_ms = 0.0

    @property
    def won_ms(self) -> float:
        """What drafting has won (negative: lost) in the answer so far, against plain."""
        return self._won_ms

    def available_ms(self, plain_ms: float) -> float:
        """What the next round may lose, at worst, with one token at `plain_ms`."""
        return self.seed * plain_ms + self.share * self._written_ms + self._won_ms

    def record(self, *, tokens: int, round_ms: float, plain_ms: float, drafted: bool) -> None:
        """One round wrote `tokens` in `round_ms` (its draft's time included), where one
        plain token cost `plain_ms`; a round that drafted is charged its gain or loss."""
        self._written_ms += tokens * plain_ms
        if drafted:
            self._won_ms += tokens * plain_ms - round_ms

    @staticmethod
    def worst_ms(offer: Offer, k: int, prices: Sequence[float]) -> float:
        """What a round of k drafts from `offer` loses against plain if none is kept: its
        pass, its drafting and its one-off cost (a draft model's catch-up), all paid now,
        for the one token plain would have written."""
        return prices[k + 1] - prices[1] + offer.token_ms * k + offer.extra_ms

    def longest(self, offer: Offer, prices: Sequence[float]) -> int:
        """The longest draft from `offer` whose worst case, weighted by how often its first
        token is refused, fits the allowance (0: none).

        A probed drafter (the draft model, a head) is left its own length: its acceptance
        follows every written token, the draft model cuts its draft where it is no longer
        sure of the next one, and what its guesses may cost is bounded by the probes'
        budget (PROBE_BUDGET) instead. The allowance governs the drafters chosen on their
        estimate alone, never probed: copies, priced by a match length's acceptance."""
        if offer.probed:
            return offer.k_max
        room = self.available_ms(prices[1])
        # The worst case happens as often as the first token is refused, by the estimate.
        refused = min(1.0, max(0.0, 2.0 - offer.curve[1])) if len(offer.curve) > 1 else 1.0
        k = 0
        for kk in range(1, min(offer.k_max, len(prices) - 2) + 1):
            if refused * self.worst_ms(offer, kk, prices) > room:
                break
            k = kk
        return k
