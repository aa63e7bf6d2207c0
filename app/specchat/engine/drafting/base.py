"""The drafter protocol: what every drafter offers the decoder and the policies."""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Protocol

import numpy as np

from specchat.engine.costs.machine import MachineCosts
from specchat.engine.costs.priors import (
    DRAFTER_PRIOR,
    MAX_K,
    PRIOR_WEIGHT,
    ROUND_DECAY,
    SCORED_HURDLE,
)
from specchat.engine.costs.table import CostTable
from specchat.engine.drafting.head_protocol import Head as Head
from specchat.engine.suffix.index import SuffixIndex
from specchat.engine.types import SamplingParams

if TYPE_CHECKING:
    # Only for annotations: importing the drafters must not load llama_cpp, so that the
    # window can list them before any model is loaded.
    from specchat.engine.drafting.trace_column import TraceColumn
    from specchat.engine.llamacpp.hidden_state_head import HiddenStateHead
    from specchat.engine.llamacpp.target import DraftModel, Target


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


#: What an Acceptance stores: its decayed counts and how much it has observed.
_ACCEPTANCE_COUNTS = ("first_kept", "first_trials", "cont_kept", "cont_trials", "observed")


def _count(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ValueError(f"stored {name} is not a count: {value!r}")
    return float(value)


def counts(state: Mapping[str, object], names: Sequence[str]) -> dict[str, float]:
    """`names` read from a stored `state` as non-negative numbers (ValueError otherwise)."""
    return {name: _count(state.get(name), name) for name in names}


def count_lists(
    state: Mapping[str, object], names: Sequence[str], length: int
) -> dict[str, list[float]]:
    """`names` read from a stored `state` as lists of `length` non-negative numbers, one per
    band (ValueError otherwise: a file written for other bands)."""
    lists = {}
    for name in names:
        value = state.get(name)
        if not isinstance(value, list) or len(value) != length:
            raise ValueError(f"stored {name} does not hold {length} bands")
        lists[name] = [_count(v, name) for v in value]
    return lists


@dataclass
class Acceptance:
    """Decayed acceptance counts: of a drafter's first token, and of a token after a kept one.

    Drafts are kept in runs (once a draft is right, the next token usually is too), so one
    per-token rate would undervalue long drafts; two rates capture that.

    Attributes:
        first_kept, first_trials: decayed counts for the first draft token.
        cont_kept, cont_trials: decayed counts for a token whose predecessor was kept.
        decay: per-round memory (0.9: about ten rounds).
        observed: how many observations it has taught (never decayed): what a stored
            estimate is judged by (see learnt).
    """

    first_kept: float
    first_trials: float
    cont_kept: float
    cont_trials: float
    decay: float = ROUND_DECAY
    observed: float = 0.0

    @classmethod
    def prior(cls, alpha: float, continued: float, weight: float = PRIOR_WEIGHT) -> Acceptance:
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

    def learnt(self) -> dict[str, float]:
        """Its counts as plain data, to be stored (see drafting/stored_estimates.py)."""
        return {name: float(getattr(self, name)) for name in _ACCEPTANCE_COUNTS}

    def resume(self, state: Mapping[str, object]) -> None:
        """Start from counts `learnt` gave (ValueError where they are not its own)."""
        self.__dict__.update(counts(state, _ACCEPTANCE_COUNTS))

    def update(self, drafted: int, accepted: int) -> None:
        if drafted <= 0:
            return
        self.observed += 1
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
    """Proposed tokens: what the decoder checks. A drafter with more to say about its draft
    (a copy's match length, the draft model's catch-up) returns a subclass of its own.

    Attributes:
        tokens: the proposal, possibly shorter than asked (or empty).
        probs: the drafter's probability vector q for each token, or None when the drafter
            is deterministic (q is then one-hot at each token).
        ms: time spent proposing.
        source: name of the drafter that produced it ("plain" for no draft).
        origin: where a drafter that copies found it, for people ("this chat", "an earlier
            chat", "an attachment"), or a head that drafts from the target's hidden state
            ("the MTP head"); "" otherwise.
        branches: other proposals to check in the same pass, each a whole path from the
            first draft token (a tree: they share their common prefix with `tokens`);
            deterministic drafts at temperature 0 only.
    """

    tokens: tuple[int, ...]
    probs: tuple[np.ndarray, ...] | None
    ms: float
    source: str
    origin: str = ""
    branches: tuple[tuple[int, ...], ...] = ()


@dataclass(frozen=True, kw_only=True)
class Offer:
    """Everything `auto` needs to price what a drafter could do this round.

    Attributes:
        source: the drafter's name.
        k_max: the longest draft it offers.
        curve: expected tokens per round (the target's own included) for K = 0 … k_max:
            the drafter's own acceptance estimate.
        token_ms: its own time to draft one token.
        extra_ms: a one-off cost of drafting now, on top of the per-token cost (the draft
            model's catch-up over text it has not seen).
        round_ms: what drafting costs this round beyond its tokens, whatever K, paid again
            in later rounds (the draft model's first pass also reads the token the last
            round left it, and a pass of two rows costs more than one of one).
        probe_token_ms: the drafted token's price a probe is judged by, where it differs
            from `token_ms` (see CostTable.drafted_token_ms).
        hurdle: the gain over plain it must promise to be used (HURDLE or SCORED_HURDLE).
        probed: whether `auto` should try it with K = 1 now and then: its acceptance is learnt
            only from rounds that use it.
        fills_pass: whether it is asked for the whole pass `auto` pays for (the cheapest size
            at or above the K chosen) and fills those rows itself (a tree's branches, a long
            copy); otherwise the decoder fills spare rows generically.
        sizes_itself: whether it ends its draft where going on stops paying, token by token
            (the draft model, by how sure it is of each): `auto` chooses it by its curve and
            asks it for up to k_max.
        detail: one phrase for people ("12-token match, α ≈ 0.83").
    """

    source: str
    k_max: int
    curve: Sequence[float]
    token_ms: float = 0.0
    extra_ms: float = 0.0
    round_ms: float = 0.0
    probe_token_ms: float | None = None
    hurdle: float = SCORED_HURDLE
    probed: bool = False
    fills_pass: bool = False
    sizes_itself: bool = False
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
        sampling: the round's sampling (it may change in the middle of an answer); None:
            as before.
        margins: the target's margin at each token the round wrote (how predictable the
            text was there); empty where not known.
    """

    context: Sequence[int]
    draft: Draft
    accepted: int
    margin: float | None = None
    p_emitted: tuple[float, ...] = ()
    sampling: SamplingParams | None = None
    margins: tuple[float, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Answer:
    """What a drafter is told once, before an answer's first round.

    Attributes:
        prompt: the text the answer follows.
        sampling: the answer's sampling at its start (later changes come with each Outcome).
        conversation: the conversation it belongs to, where known (None otherwise).
        prediction: the text the answer is expected to mostly repeat (an API request's
            prediction; empty for none).
    """

    prompt: Sequence[int]
    sampling: SamplingParams = SamplingParams()
    conversation: int | str | None = None
    prediction: Sequence[int] = ()


class LearntEstimate(Protocol):
    """One estimate a drafter learns, as plain data: what a session stores for the next."""

    def learnt(self) -> Mapping[str, object]:
        """Its state as JSON-ready data."""
        ...

    def resume(self, state: Mapping[str, object]) -> None:
        """Start from a state `learnt` gave (ValueError where it is not one of its own)."""
        ...


class Estimates:
    """Where the drafters' learnt estimates start: where each drafter's own priors put them
    (this class), or where a subclass sets them (a tool that fits them on the very answers it
    replays: tools/replay_with_hindsight.py; what earlier sessions of the pair learnt:
    drafting/stored_estimates.py). The one seam for estimates: the registry hands every
    drafter of a pair to `start` as it is built, before any round."""

    def start(self, drafter: Drafter) -> None:
        """Set where `drafter`'s estimates start (here: the priors it was built with)."""

    @staticmethod
    def of(drafter: Drafter) -> dict[str, LearntEstimate]:
        """What `drafter` learns that may outlive a session, by name."""
        return drafter._estimates()


@dataclass(frozen=True, kw_only=True)
class LoadedPair:
    """What a drafter may be built on.

    Attributes:
        target: the target model (None where no model is loaded: a replay).
        draft: the draft model, or None.
        head: a draft file loaded beside the target as a head over its hidden state (a
            Gemma 4 assistant, an EAGLE-3 or DFlash draft; its `serves` names the drafter
            that drafts with it: drafting/head.py's `load_head`),
            or None.
        heads: heads made already, by the name of the drafter that drafts with them: it
            drafts with the one given here instead of making its own (a replay gives its
            recorded heads; a test a head whose passes it prices).
        costs: the machine's stored cost tables for the pair (a drafter that runs a model
            prices itself with that model's table), or None.
        ends_answer: whether a token ends the answer (the target's end-of-generation
            tokens): no draft goes past one.
        clock: seconds, for a drafter that times itself (a replay runs on a virtual one).
        index: what was said before this chat (earlier chats, attached files) and this
            chat itself, for a drafter that copies from it: the session's suffix index,
            which the session alone feeds (engine/said.py); an empty one of its own where
            no session feeds it (a decoder built alone, a replay).
        estimates: where its drafters' learnt estimates start (see Estimates).
    """

    target: Target | None = None
    draft: DraftModel | None = None
    head: HiddenStateHead | None = None
    heads: Mapping[str, Head] = field(default_factory=dict)
    costs: MachineCosts | None = None
    ends_answer: Callable[[int], bool] = _never
    clock: Callable[[], float] = time.perf_counter
    index: SuffixIndex = field(default_factory=SuffixIndex)
    estimates: Estimates = field(default_factory=Estimates)

    @classmethod
    def of(
        cls,
        target: Target,
        draft: DraftModel | None = None,
        *,
        head: HiddenStateHead | None = None,
        heads: Mapping[str, Head] | None = None,
        costs: MachineCosts | None = None,
        clock: Callable[[], float] = time.perf_counter,
        index: SuffixIndex | None = None,
        estimates: Estimates | None = None,
    ) -> LoadedPair:
        """The pair a round loop drafts over: its answers end at the target's
        end-of-generation tokens, and without `costs` its target's table starts at the
        priors for where the target runs (a CPU's or a GPU's) until rounds teach it."""
        return cls(
            target=target,
            draft=draft,
            head=head,
            heads=dict(heads or {}),
            costs=costs or MachineCosts(CostTable(gpu=target.info.gpu_layers > 0)),
            ends_answer=EndTokens(target.is_eog),
            clock=clock,
            index=index if index is not None else SuffixIndex(),
            estimates=estimates or Estimates(),
        )


@dataclass(frozen=True, kw_only=True)
class Listing:
    """How a drafter is listed and where it may run.

    Attributes:
        label: what the window calls it ("Prompt lookup").
        needs_model: whether it needs the pair's draft model (unavailable without one).
        in_auto: whether `auto` may choose it.
        reads_target: whether it drafts with a head over the target's hidden state (its
            drafter's `head`, a Head): the bench runs every such drafter a pair offers, and
            its cost per drafted token has a table of its own (MachineCosts.heads).
        columns: its columns in a recorded answer (the bench's traces, replay and ceiling:
            engine/drafting/trace_column.py), one for each kind it records or derives.
        subsumes: drafters whose proposals it makes too, from the same text and with a match
            at least as long: where it is built, `auto` does not ask them (see
            `auto_drafters`).
        priority: place in the mode list and in auto's order of preference on ties (lower
            first; equal ones in registration order).
    """

    label: str
    needs_model: bool = False
    in_auto: bool = True
    reads_target: bool = False
    columns: tuple[type[TraceColumn], ...] = ()
    subsumes: tuple[str, ...] = ()
    priority: int = 100


class Drafter(abc.ABC):
    """Proposes tokens for the target to check; owns everything it needs and learns.

    A drafter is one subclass plus one `@register` (see registry.py): the decoder, the
    policies, the window's mode list, the CLI and the bench find it there. Its whole surface:
    `create` it for a pair, `begin` each answer (and `ready` it where it will likely be used),
    `offer` what it could do this round (no side effects: the policy may ask and not take it),
    `propose` a draft, `observe` every round to learn.

    Attributes:
        name: the mode's name in settings, the CLI and reports ("lookup").
        listing: its label, whether it needs a model or may run under `auto`, and its order.
    """

    name: ClassVar[str]
    listing: ClassVar[Listing]

    def __init__(self) -> None:
        # Its acceptance estimate, learnt from the rounds it drafted (a drafter that knows
        # better overrides `offer`).
        self._acceptance = Acceptance.prior(*DRAFTER_PRIOR)
        self._ends_answer: Callable[[int], bool] = _never

    @classmethod
    def create(cls, pair: LoadedPair, built: Mapping[str, Drafter]) -> Drafter | None:
        """This drafter for a loaded pair (None if it cannot serve it); `built` holds the
        drafters registered before it, for one that draws on others."""
        drafter = cls()
        drafter._ends_answer = pair.ends_answer
        return drafter

    def begin(self, answer: Answer) -> None:  # noqa: B027  # optional: empty by default
        """A new answer starts (called once for every answer, before its first round)."""

    def ready(self, prompt: Sequence[int]) -> None:  # noqa: B027  # optional: empty by default
        """Ready whatever costs time now that this answer will likely use it (the draft
        model's prompt evaluation); called after `begin`, only where it pays."""

    def offer(
        self, context: Sequence[int], k_cap: int, prices: Sequence[float] | None
    ) -> Offer | None:
        """What it could draft after `context` this round (None: nothing), priced for `auto`;
        `prices`: the target's time to check n tokens by n (index 1: one token), or None
        before any measurement. Has no side effects."""
        k_max = min(MAX_K, k_cap)
        if k_max <= 0:
            return None
        alpha, continued = self._acceptance.alpha, self._acceptance.continued
        curve = [expected_tokens(alpha, k, continued) for k in range(k_max + 1)]
        return Offer(source=self.name, k_max=k_max, curve=curve, detail=f"α ≈ {alpha:.2f}")

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
            self._acceptance.update(drafted, outcome.accepted)

    def _estimates(self) -> dict[str, LearntEstimate]:
        """What it learns that may outlive a session, by name (read through Estimates.of;
        private, so the drafter's surface stays its eight members)."""
        return {"acceptance": self._acceptance}
