"""The drafter protocol: what every drafter offers the decoder and the policies."""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from specchat.engine.types import SamplingParams

if TYPE_CHECKING:
    # Only for annotations: importing the drafters must not load llama_cpp, so that the
    # window can list them before any model is loaded.
    from specchat.engine.cost_table import MachineCosts
    from specchat.engine.llama import LlamaModel

#: Longest draft of a fixed K (the window's slider) and of the draft model under `auto`.
MAX_K = 16

#: Longest draft under `auto`. Prompt-lookup drafts cost nothing to make, and on a CPU a
#: target pass's cost per row keeps falling with its size (≈ 36 ms for one token, ≈ 20 ms a
#: row at 16, ≈ 13 ms at 64 on a 2-core laptop), so a long copy is checked fastest in big
#: batches; the auto policy only asks for them where the match says the copy will go on.
MAX_LOOKUP_K = 64


def _never(token: int) -> bool:
    return False


def end_cut(tokens: Sequence[int], ends_answer: Callable[[int], bool]) -> int:
    """How many of `tokens` a draft may hold: up to and including the first that ends an
    answer, since nothing after it can be kept. A copy of an earlier turn's ending otherwise
    runs on through the chat format into the next message, and auto prices (and pays for)
    rows that can only be thrown away."""
    for i, token in enumerate(tokens):
        if ends_answer(token):
            return i + 1
    return len(tokens)


def through_end(tokens: Sequence[int], ends_answer: Callable[[int], bool]) -> tuple[int, ...]:
    """`tokens` cut after the first that ends an answer (see end_cut)."""
    return tuple(tokens[: end_cut(tokens, ends_answer)])


class EndTokens:
    """Whether a token ends an answer (the target's end-of-generation test), remembered per
    token: a copying drafter asks it of up to 64 tokens a round. Remembering is safe because
    the target's end-of-turn tokens are set when the engine is built (engine/session.py),
    before any answer asks."""

    def __init__(self, is_end: Callable[[int], bool]) -> None:
        self._is_end = is_end
        self._known: dict[int, bool] = {}

    def __call__(self, token: int) -> bool:
        known = self._known.get(token)
        if known is None:
            known = self._known[token] = bool(self._is_end(token))
        return known


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
class Acceptance:
    """Decayed acceptance counts: of a drafter's first token, and of a token after a kept one.

    Drafts are kept in runs (once a draft is right, the next token usually is too), so one
    per-token rate would undervalue long drafts; two rates capture that.

    Attributes:
        first_kept, first_trials: decayed counts for the first draft token.
        cont_kept, cont_trials: decayed counts for a token whose predecessor was kept.
        decay: per-round memory (0.9: about ten rounds).
    """

    first_kept: float
    first_trials: float
    cont_kept: float
    cont_trials: float
    # Short memory: acceptance changes with the kind of text being written, and rounds spent
    # on a drafter that stopped paying are lost time.
    decay: float = 0.9

    @classmethod
    def prior(cls, alpha: float, continued: float, weight: float = 2.0) -> Acceptance:
        return cls(alpha * weight, weight, continued * weight, weight)

    @property
    def alpha(self) -> float:
        """Acceptance of the first draft token."""
        return self.first_kept / self.first_trials if self.first_trials > 0 else 0.0

    @property
    def continued(self) -> float:
        """Acceptance of a draft token whose predecessor was kept.

        Below one (decayed) trial the missing weight is filled with the first token's rate:
        a drafter used only with K = 1 never observes a second token, and a fixed prior there
        would hold K at 1 for good even where every draft is kept. Runs are at least as likely
        to go on as to start, so α is the cautious guess until longer drafts are seen.
        """
        missing = max(0.0, 1.0 - self.cont_trials)
        return (self.cont_kept + self.alpha * missing) / (self.cont_trials + missing)

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


@dataclass(frozen=True)
class Draft:
    """Proposed tokens.

    Attributes:
        tokens: the proposal, possibly shorter than asked (or empty).
        probs: the drafter's probability vector q for each token, or None when the drafter
            is deterministic (q is then one-hot at each token).
        ms: time spent proposing.
        source: name of the drafter that produced it ("plain" for no draft).
        match_len: for prompt lookup, the n-gram length that matched (0 otherwise).
        catchup: for the draft model, context tokens it had to evaluate before drafting
            (1–2 normally; the whole prompt the first time).
        catchup_ms: the part of `ms` spent on that catch-up.
        origin: where a drafter that copies found it, for people ("this chat", "an earlier
            chat", "an attachment"); "" otherwise.
        branches: other proposals to check in the same pass, each a whole path from the
            first draft token (a tree: they share their common prefix with `tokens`);
            deterministic drafts at temperature 0 only.
    """

    tokens: tuple[int, ...]
    probs: tuple[np.ndarray, ...] | None
    ms: float
    source: str
    match_len: int = 0
    catchup: int = 0
    catchup_ms: float = 0.0
    origin: str = ""
    branches: tuple[tuple[int, ...], ...] = ()


@dataclass(frozen=True)
class Offer:
    """What a drafter could do this round, for `auto` to price.

    Attributes:
        k_max: the longest draft it offers.
        curve: expected tokens per round (the target's own included) for K = 0 … k_max:
            the drafter's own acceptance estimate.
        extra_ms: a one-off cost of drafting now, on top of the per-token cost (the draft
            model's catch-up over text it has not seen).
        detail: one phrase for people ("12-token match, α ≈ 0.83").
    """

    k_max: int
    curve: Sequence[float]
    extra_ms: float = 0.0
    detail: str = ""


@dataclass(frozen=True)
class Outcome:
    """What became of one round, told to every drafter.

    Attributes:
        context: the text after the round (prompt and answer so far).
        draft: the round's draft (empty for a plain round); `draft.source` names its maker.
        accepted: how many of its tokens were kept.
        margin: the target's top logit minus its runner-up on the context's last token (how
            sure it was of it); None where not known.
        p_emitted: the target's probability (under the round's sampling) of each token the
            round wrote; empty where not known.
    """

    context: Sequence[int]
    draft: Draft
    accepted: int
    margin: float | None = None
    p_emitted: tuple[float, ...] = ()


@dataclass(frozen=True)
class LoadedPair:
    """The models a drafter may be built on.

    Attributes:
        target: the target model.
        draft: the draft model, or None.
        costs: the machine's stored cost tables for the pair (a drafter that runs a model
            prices itself with that model's table), or None.
    """

    target: LlamaModel
    draft: LlamaModel | None
    costs: MachineCosts | None = None


class Drafter(abc.ABC):
    """Proposes tokens for the target to check; owns everything it needs and learns.

    A drafter is one subclass plus one `@register` (see registry.py): the decoder, the
    policies, the window's mode list, the CLI and the bench find it there.

    Attributes:
        name: the mode's name in settings, the CLI and reports ("lookup").
        label: what the window calls it ("Prompt lookup").
        needs_model: whether it needs the pair's draft model (unavailable without one).
        in_auto: whether `auto` may choose it.
        subsumes: drafters whose proposals it makes too, from the same text and with a match at
            least as long: where it is built, `auto` does not ask them (see `auto_drafters`).
        probed: whether `auto` tries it with K = 1 now and then: its acceptance is learnt only
            from rounds that use it.
        priority: place in the mode list and in auto's order of preference on ties (lower
            first; equal ones in registration order).
        fills_pass: whether, under `auto`, it is asked for the whole pass `auto` pays for
            (the cheapest size at or above the K chosen) and fills those rows itself: a
            drafter proposing a tree spends them on branches.
        acceptance: its acceptance estimate, learnt from the rounds it drafted (a drafter that
            knows better overrides `expected_tokens_curve` and `offer`).
        ends_answer: whether a token ends the answer (the target's end-of-generation tokens,
            set when the drafters are built for a pair): no draft goes past one.
    """

    name: ClassVar[str]
    label: ClassVar[str]
    needs_model: ClassVar[bool] = False
    in_auto: ClassVar[bool] = True
    subsumes: ClassVar[tuple[str, ...]] = ()
    probed: ClassVar[bool] = False
    priority: ClassVar[int] = 100
    fills_pass: ClassVar[bool] = False

    def __init__(self) -> None:
        self.acceptance = Acceptance.prior(0.5, 0.5)
        self.ends_answer: Callable[[int], bool] = _never

    @classmethod
    def create(cls, pair: LoadedPair, built: Mapping[str, Drafter]) -> Drafter | None:
        """This drafter for a loaded pair (None if it cannot serve it); `built` holds the
        drafters registered before it, for one that draws on others."""
        return cls()

    # The hooks below are optional for a drafter: empty unless it has something to do.
    def enter_conversation(self, conversation: int | str) -> None:  # noqa: B027
        """The next answer belongs to `conversation` (called before `prepare` when the
        conversation is known)."""

    def use_prediction(self, tokens: Sequence[int]) -> None:  # noqa: B027
        """The text this answer is expected to mostly repeat (an API request's prediction;
        empty for none): called before `prepare` for every answer."""

    def use_sampling(self, sampling: SamplingParams) -> None:  # noqa: B027
        """The sampling of the rounds from now on: called before an answer's first round
        and whenever it changes."""

    def prepare(self, prompt: Sequence[int], *, eager: bool) -> None:  # noqa: B027
        """A new answer starts after `prompt`; `eager`: it is likely to be used, so ready
        whatever costs time (the draft model's prompt evaluation)."""

    @abc.abstractmethod
    def propose(
        self,
        context: Sequence[int],
        k: int,
        sampling: SamplingParams,
        rng: np.random.Generator,
    ) -> Draft:
        """Up to k tokens to follow `context`."""

    def observe(self, outcome: Outcome) -> None:
        """Learn from a round (whichever drafter made its draft)."""
        drafted = len(outcome.draft.tokens)
        if outcome.draft.source == self.name and drafted:
            self.acceptance.update(drafted, outcome.accepted)

    def token_ms(self, plain_ms: float) -> float:
        """Estimated time to draft one token, given a plain target step's time."""
        return 0.0

    def expected_tokens_curve(self, k_max: int) -> list[float]:
        """Expected tokens per round for K = 0 … k_max, before looking at the text."""
        # Acceptance.expected(k) for each k, with its two rates worked out once (asked every
        # round, plain ones included).
        alpha, continued = self.acceptance.alpha, self.acceptance.continued
        return [expected_tokens(alpha, k, continued) for k in range(k_max + 1)]

    def offer(self, context: Sequence[int], k_cap: int) -> Offer | None:
        """What it could draft after `context` this round (None: nothing)."""
        k_max = min(MAX_K, k_cap)
        if k_max <= 0:
            return None
        detail = f"α ≈ {self.acceptance.alpha:.2f}"
        return Offer(k_max, self.expected_tokens_curve(k_max), detail=detail)
