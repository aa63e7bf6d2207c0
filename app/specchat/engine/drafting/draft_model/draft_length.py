"""How long a draft model's draft should be, decided token by token on the whole curve."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from specchat.engine.costs.priors import ESTIMATES_STORED_CAP, ROUND_DECAY
from specchat.engine.drafting.base import counts

_RATE_STATE = ("tokens", "ms", "weight", "observed")


class DraftLength:
    """Ends a draft where no longer draft promises a better rate than stopping.

    A K chosen before drafting prices every draft alike; the draft model knows, after each
    token, how sure it was of it, and so how likely the round is to keep it (its calibrated
    confidence). After each token the expected tokens of stopping there are known; going on
    adds the tokens not drafted yet, each kept after the one before as often as tokens after
    one as sure as the last are (a run of sure tokens tends to go on), at each longer pass's
    price and a drafted token's time apiece. The draft goes on while some longer draft's
    extra tokens outnumber what its extra time would make at the rate rounds go at
    (`reference`): the renewal-reward rule for a throughput, where a round's own rate so far
    would stop a long sure run too soon and let a round that began badly go on too long. That
    rate is the one its rounds have made (RoundRate), never below plain decoding's, which
    `auto` can always fall back to, nor above the curve's best at the text's acceptance: the
    best alone, where rounds fall short of it, demands near-certainty of every token where
    drafting barely pays, and stops each draft at its first token, a round slower than
    plain. So a run of sure tokens goes far past the K its average acceptance suggests, and
    a draft ends at a token it doubts. Once it ends, a greedy draft's rows are cut to the
    best prefix: drafting is paid by then, a row unlikely to be kept is not (a sampled
    draft's are not cut: see DraftModelDrafter.propose).

    Attributes:
        prices: the target's time to check n tokens, by n (index 1: one token).
        token_ms: the draft model's time per drafted token.
        continued: the chance a token not drafted yet is kept after a kept one: before the
            first token, the text's rate; after one, the rate after a token as sure.
        expected: expected tokens of the round at each length drafted so far (index 0:
            no draft, the target's own token).
        reference: tokens per ms that rounds go at: the rate its rounds made (`achieved`),
            between plain's and the best rate over draft lengths at the text's rate
            (`continued` as given); that best where no round was timed.
    """

    def __init__(
        self,
        prices: Sequence[float],
        token_ms: float,
        continued: float,
        achieved: float | None = None,
    ) -> None:
        self.prices = prices
        self.token_ms = token_ms
        self.continued = continued
        self.expected = [1.0]
        self._survival = 1.0  # the chance every token drafted so far is kept
        best = self._best_rate(continued)
        if achieved is None:
            self.reference = best
        else:
            self.reference = min(best, max(1.0 / prices[1], achieved))

    @property
    def drafted(self) -> int:
        return len(self.expected) - 1

    def _best_rate(self, rate: float) -> float:
        """The best expected rate over draft lengths, each token kept after the one before
        with `rate`."""
        best, tokens, reach = 1.0 / self.prices[1], 1.0, 1.0
        for k in range(1, len(self.prices) - 1):
            reach *= rate
            tokens += reach
            best = max(best, self._rate(tokens, k + 1, k))
        return best

    def add(self, kept_rate: float, next_rate: float) -> None:
        """One more drafted token, kept with `kept_rate` if the ones before it were, and
        followed by one kept with `next_rate` if it is."""
        self._survival *= kept_rate
        self.expected.append(self.expected[-1] + self._survival)
        self.continued = next_rate

    def _rate(self, tokens: float, rows: int, drafted: int) -> float:
        return tokens / (self.prices[rows] + self.token_ms * drafted)

    def goes_on(self, k_max: int) -> bool:
        """Whether to draft another token, up to `k_max` in all."""
        n = self.drafted
        k_max = min(k_max, len(self.prices) - 2)
        tokens, reach = self.expected[n], self._survival
        for m in range(n + 1, k_max + 1):
            reach *= self.continued
            tokens += reach
            extra_ms = self.prices[m + 1] - self.prices[n + 1] + self.token_ms * (m - n)
            if tokens - self.expected[n] > self.reference * extra_ms:
                return True
        return False

    def best_length(self) -> int:
        """How many of the drafted tokens to check: the prefix with the best rate, the
        drafting already paid."""
        n = self.drafted
        return max(range(n + 1), key=lambda i: (self._rate(self.expected[i], i + 1, n), i))


class RoundRate:
    """Tokens per millisecond the draft model's rounds made: decayed sums of each round's
    tokens and its time (drafting and the target's check), about the last ten rounds.

    Attributes:
        tokens, ms: the decayed sums.
        weight: the decayed count of rounds behind them (how much they say).
        observed: rounds added, undecayed (what a session must have seen to store it).
        decay: per-round memory.
    """

    def __init__(self, decay: float = ROUND_DECAY) -> None:
        self.tokens = 0.0
        self.ms = 0.0
        self.weight = 0.0
        self.observed = 0.0
        self.decay = decay

    def add(self, tokens: int, ms: float) -> None:
        """One round that wrote `tokens` in `ms`."""
        self.tokens = self.tokens * self.decay + tokens
        self.ms = self.ms * self.decay + ms
        self.weight = self.weight * self.decay + 1.0
        self.observed += 1.0

    def learnt(self) -> dict[str, float]:
        """Its sums as plain data, to be stored (see drafting/stored_estimates.py); the
        count of rounds capped at ESTIMATES_STORED_CAP, so later sessions keep their say."""
        state = {name: float(getattr(self, name)) for name in _RATE_STATE}
        state["observed"] = min(state["observed"], ESTIMATES_STORED_CAP)
        return state

    def resume(self, state: Mapping[str, object]) -> None:
        """Start from sums `learnt` gave (ValueError where they are not its own)."""
        self.__dict__.update(counts(state, _RATE_STATE))

    def age(self) -> None:
        """A round that was not one of these: what they say counts for less, their rate
        unchanged."""
        self.tokens *= self.decay
        self.ms *= self.decay
        self.weight *= self.decay

    @property
    def rate(self) -> float | None:
        """Tokens per ms (None before any round)."""
        return self.tokens / self.ms if self.ms > 0 else None
