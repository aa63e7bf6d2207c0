"""SpeculativeDecoder: the round loop — draft, verify in one target pass, roll back, repeat."""

from __future__ import annotations

import codecs
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

import numpy as np

from specchat.engine.decoding.pricer import RoundContext
from specchat.engine.decoding.schedule import AutoPolicy, FixedPolicy
from specchat.engine.decoding.stop_strings import StopStringFilter
from specchat.engine.decoding.verify import Verdict, verify
from specchat.engine.drafting import (
    AUTO,
    PLAIN,
    Answer,
    Draft,
    Drafters,
    LoadedPair,
    Offer,
    Outcome,
)
from specchat.engine.drafting.copies.matching import locate
from specchat.engine.llamacpp.model import ContextFullError
from specchat.engine.llamacpp.recurrent_state import prompt_tail
from specchat.engine.llamacpp.target import DraftModel, Target
from specchat.engine.types import (
    Controls,
    GenerationRequest,
    PolicyChoice,
    RoundResult,
    SamplingParams,
    Stats,
    StopReason,
    TokenEvent,
    TokenKind,
)


class LiveControls:
    """The controls of a generation in progress: set from any thread, read by the decoder at
    each round's start (so a change applies from the next round, never mid-round)."""

    def __init__(self, controls: Controls) -> None:
        self._lock = threading.Lock()
        self._controls = controls

    def get(self) -> Controls:
        with self._lock:
            return self._controls

    def set(self, controls: Controls) -> None:
        with self._lock:
            self._controls = controls


class Generation(Iterator[RoundResult]):
    """One generation in progress: iterate it for one RoundResult per target pass (nothing
    runs before the first `next`); `steer` moves its controls from any thread.

    Attributes:
        request: what was asked (its `controls` are those at the start).
    """

    def __init__(
        self, request: GenerationRequest, rounds: Callable[[LiveControls], Iterator[RoundResult]]
    ) -> None:
        self.request = request
        # The one place a generation's live controls are made: the window steers through
        # `steer`, the decoder reads them at each round's start.
        self._live = LiveControls(request.controls)
        self._rounds = rounds(self._live)

    @property
    def controls(self) -> Controls:
        return self._live.get()

    def steer(self, controls: Controls) -> None:
        """Use `controls` from the next round on (never mid-round)."""
        self._live.set(controls)

    def __next__(self) -> RoundResult:
        return next(self._rounds)

    def watch(self, watcher: Callable[[Iterator[RoundResult]], Iterator[RoundResult]]) -> None:
        """Pass its rounds through `watcher` from now on (what a session notes of how its
        answers end: engine/session.py); `close` closes what `watcher` returns."""
        self._rounds = watcher(self._rounds)

    def close(self) -> None:
        """End the generation where it stands (its cache stays as the last round left it)."""
        close = getattr(self._rounds, "close", None)
        if close is not None:
            close()


class _TextStream:
    """Turns token bytes into text without ever splitting a UTF-8 character."""

    def __init__(self, model: Target) -> None:
        self._model = model
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, token: int) -> str:
        return self._decoder.decode(self._model.piece(token))


class SpeculativeDecoder:
    """Generates with a target model; each round the policy picks a drafter and K, the
    drafter proposes, the target verifies in one pass.

    Every mode runs through the same loop: K = 0 is plain decoding. Output is exactly the
    target's: greedy settings give its argmax tokens, sampling gives its distribution.

    Attributes:
        pair: what it decodes with (the models, their costs, the suffix index, the clock),
            built once by whoever loaded it (engine/session.py, a replay, a test).
        target: the model whose output this is (the pair's).
        draft: the draft model, if any (the pair's).
        drafters: the drafters this pair offers (from the registry).
        auto: the auto policy (kept across generations, so what it learnt carries over); it
            prices with the pair's costs, which its drafters price their own part with.
        drafting_refused: why this pair never drafts, or "" (see `rollback_refusal`).
        clock: seconds; what the round loop and the drafters time themselves by (a replay
            passes the virtual clock its recorded passes are priced on).
    """

    def __init__(self, pair: LoadedPair, *, auto: AutoPolicy | None = None) -> None:
        """`auto`: a policy of the caller's (it should price with `pair.costs`, which the
        drafters are built on); by default one pricing with them."""
        if pair.target is None:
            raise ValueError("a decoder needs the pair's target model")
        self.pair = pair
        self.target = target = pair.target
        self.clock = pair.clock
        self.draft = pair.draft
        self.drafting_refused = rollback_refusal(target, pair.draft)
        self.auto = auto or AutoPolicy(gpu=target.info.gpu_layers > 0, costs=pair.costs)
        self.drafters = Drafters(pair)
        self._fixed = FixedPolicy()
        # Where the last round priced the target (the first answer's readying: at the table's
        # own depth): an answer's drafters are readied at it, before its first round.
        self._last_round = RoundContext()

    # --- one generation ----------------------------------------------------------------------
    def generate(
        self, request: GenerationRequest, *, cancel: threading.Event | None = None
    ) -> Generation:
        """The rounds of `request` until a stop (the last one carries `stop`)."""
        return Generation(request, lambda live: self._rounds(request, live, cancel))

    def _rounds(
        self, request: GenerationRequest, live: LiveControls, cancel: threading.Event | None
    ) -> Iterator[RoundResult]:
        prompt, stats = self._read_prompt(request, live)
        target = self.target
        rng = np.random.default_rng(request.controls.sampling.seed)
        context = prompt  # grows with every emitted token
        text = _TextStream(target)
        stops = StopStringFilter(request.stop_strings)
        decode_start = self.clock()
        round_index = 0
        while True:
            if cancel is not None and cancel.is_set():
                yield self._final(round_index, stats, decode_start, StopReason.CANCELLED, stops)
                return
            if stats.emitted >= request.max_tokens:
                yield self._final(round_index, stats, decode_start, StopReason.MAX_TOKENS, stops)
                return
            room = target.room()
            if room < 1:
                yield self._final(round_index, stats, decode_start, StopReason.CONTEXT_FULL, stops)
                return
            controls = live.get()
            sampling = controls.sampling
            mode = self.drafters.resolve(controls.mode)
            policy = self.auto if mode == AUTO else self._fixed
            # Never draft past the answer's end or the context's. Auto may copy further in
            # one pass than a fixed K goes (see MAX_LOOKUP_K).
            k_cap = min(
                policy.longest, request.max_tokens - stats.emitted - stops.held - 1, room - 1
            )
            # Passes are priced, and learnt from, at the cache's depth (attention grows with it).
            at = RoundContext(
                depth=target.n_past,
                budget=request.max_tokens - stats.emitted - stops.held,
                rollback=target.rollback,
                snapshot_depth=target.snapshot_depth,
                largest_pass=k_cap + 1,
            )
            self._last_round = at
            made, choice = self._draft(context, mode, controls, k_cap, rng, at)
            # Auto pays for the cheapest pass holding the draft; extra rows carry more tokens.
            draft = self._fill(context, made, k_cap, at) if mode == AUTO else made

            verify_began = self.clock()
            last = context[-1]
            n_before = target.n_past
            draft, verdict, rows = self._verify(draft, last, sampling, rng)
            j = verdict.n_accepted
            target.truncate(n_before + 1 + j)
            verify_ms = self._ms_since(verify_began)

            events, stop = self._events(draft, verdict, round_index, text)
            context = context + [e.token for e in events]
            # Drafters learn from their own tokens only, not from the rows filled for them.
            margin = events[-1].margin if events else None
            emitted_p = tuple(e.p_target for e in events)
            kept = min(j, len(made.tokens))
            margins = tuple(e.margin for e in events)
            outcome = Outcome(context, made, kept, margin, emitted_p, sampling, margins)
            for drafter in self.drafters:
                drafter.observe(outcome)
            accepted = sum(1 for e in events if e.kind == TokenKind.ACCEPTED)
            generated = stats.emitted + stops.held + len(events)
            if stop is None and generated >= request.max_tokens:
                stop = StopReason.MAX_TOKENS
            if stops.active:
                events, hit = stops.filter(events, final=stop is not None)
                stop = hit or stop
            rejected = tuple(draft.tokens[j:])
            stats = _add_round(
                stats,
                drafted=len(draft.tokens),
                accepted=accepted,
                emitted=len(events),
                draft_ms=draft.ms,
                verify_ms=verify_ms,
                elapsed_s=self.clock() - decode_start,
                position_kept=j,
            )
            policy.observe(
                choice,
                batch=rows,
                verify_ms=verify_ms,
                drafted=len(made.tokens),
                accepted=kept,
                at=at,
            )
            yield RoundResult(
                index=round_index,
                events=tuple(events),
                rejected=rejected,
                rejected_text=self._text_of(rejected),
                drafted=len(draft.tokens),
                accepted=accepted,
                draft_ms=draft.ms,
                verify_ms=verify_ms,
                choice=choice,
                temperature=sampling.temperature,
                stats=stats,
                stop=stop,
                text="".join(e.text for e in events),
                rows=rows,
                draft=tuple(draft.tokens),
            )
            round_index += 1
            if stop is not None:
                return

    # --- helpers -----------------------------------------------------------------------------
    def _read_prompt(
        self, request: GenerationRequest, live: LiveControls
    ) -> tuple[list[int], Stats]:
        """Bring the target's cache to the prompt less its last token (each round then
        evaluates [last, d1..dK] in one pass) and ready the drafters for a new answer."""
        prompt = list(request.prompt_tokens)
        if not prompt:
            raise ValueError("empty prompt")
        target = self.target
        if len(prompt) >= target.n_ctx:
            raise ContextFullError(
                f"the prompt ({len(prompt)} tokens) does not fit the context window "
                f"({target.n_ctx} tokens)"
            )

        began = self.clock()
        # The target's cache always holds the context minus its last token: each round then
        # evaluates [last, d1..dK] in one pass and reads K + 1 rows of logits.
        cached = target.sync(prompt[:-1])
        # A recurrent target keeps its state a few tokens before the prompt's end, where a
        # later prompt of this chat may part from it (recurrent_state.prompt_tail).
        tail = prompt_tail(target.rollback, len(prompt) - 1, cached)
        if cached < tail:
            target.decode(prompt[cached:tail], logits="none")
        target.mark_prompt()
        if tail < len(prompt) - 1:
            target.decode(prompt[tail:-1], logits="none")
        prompt_evaluated = len(prompt) - 1 - cached
        controls = live.get()
        mode = self.drafters.resolve(controls.mode)
        self.auto.begin_answer()
        # `auto` prices passes from the machine's cost table, measured outside answers (see
        # engine/costs/profiling.py): nothing is timed here, so the first token comes as in plain.
        answer = Answer(
            prompt=prompt,
            sampling=controls.sampling,
            conversation=request.conversation,
            prediction=request.prediction,
        )
        # Priced where the last answer's rounds ran, but not at the size its last round was
        # held to by that answer's end.
        readying = replace(self._last_round, largest_pass=None)
        prices = self.auto.prices(readying)
        for drafter in self.drafters:
            drafter.begin(answer)
            if drafter.name == mode:
                drafter.ready(prompt)
        if mode == AUTO:
            self._ready_for_auto(prompt, prices, readying)
        return prompt, Stats(prompt_tokens=prompt_evaluated, prompt_ms=self._ms_since(began))

    def _ready_for_auto(
        self, prompt: Sequence[int], prices: Sequence[float] | None, at: RoundContext
    ) -> None:
        """Ready a drafter that runs a model (its prompt evaluation, before the first token)
        only where auto's first round would use it: where it would pay, and no drafter that
        needs nothing read (a prediction, a copy) would be chosen over it. Otherwise the
        first token waits for work that buys nothing, and the read is priced in its offer as
        a catch-up if it comes to pay later."""
        room = self.target.n_ctx - len(prompt)
        offers = {d: d.offer(prompt, room, prices) for d in self.drafters.for_auto}
        ready_now = [o for d, o in offers.items() if o is not None and not d.listing.needs_model]
        for drafter, offer in offers.items():
            if offer is None or not drafter.listing.needs_model:
                continue
            if self.auto.worth_readying(offer, at, rivals=ready_now):
                drafter.ready(prompt)

    def _verify(
        self, draft: Draft, last: int, sampling: SamplingParams, rng: np.random.Generator
    ) -> tuple[Draft, Verdict, int]:
        """Check `draft` in one target pass: (the draft as checked, its verdict, the pass's
        rows). A tree rides in rows the policy paid for (see Offer.fills_pass)."""
        if draft.branches and sampling.greedy and self.target.max_branches > 1:
            return self._verify_tree(draft, last, sampling, rng)
        if draft.tokens:
            self.target.mark(len(draft.tokens) + 1)
        # Lent rows, not a copy: verify reads them before the next pass overwrites them.
        logits = self.target.decode([last, *draft.tokens], logits="all", copy=False)
        verdict = verify(draft.tokens, draft.probs, logits, sampling, rng)
        return draft, verdict, len(draft.tokens) + 1

    def _events(
        self, draft: Draft, verdict: Verdict, round_index: int, text: _TextStream
    ) -> tuple[list[TokenEvent], StopReason | None]:
        """The round's tokens as events, up to an end-of-generation token (then EOS)."""
        j = verdict.n_accepted
        new_tokens = [*draft.tokens[:j], verdict.next_token]
        events: list[TokenEvent] = []
        stop: StopReason | None = None
        for i, token in enumerate(new_tokens):
            if self.target.is_eog(token):
                stop = StopReason.EOS
                break
            if i < j:
                kind = TokenKind.ACCEPTED
            elif not draft.tokens:
                kind = TokenKind.PLAIN
            elif j < len(draft.tokens):
                kind = TokenKind.CORRECTED
            else:
                kind = TokenKind.BONUS
            events.append(
                TokenEvent(
                    kind=kind,
                    token=token,
                    text=text.push(token),
                    p_target=verdict.p_target[i],
                    p_draft=verdict.p_draft[i] if draft.tokens else None,
                    round_index=round_index,
                    position=i,
                    margin=verdict.margins[i],
                    origin=draft.origin if i < j else "",
                )
            )
        return events, stop

    def _draft(
        self,
        context: Sequence[int],
        mode: str,
        controls: Controls,
        k_cap: int,
        rng: np.random.Generator,
        at: RoundContext,
    ) -> tuple[Draft, PolicyChoice]:
        """The policy picks (drafter, K) for the round `at`; the drafter proposes."""
        if not self.target.can_rollback:
            # Rejected drafts could only be dropped by re-reading the whole context.
            return _NO_DRAFT, PolicyChoice(PLAIN, 0, f"plain: {self.drafting_refused}")
        if k_cap <= 0:
            return _NO_DRAFT, PolicyChoice(PLAIN, 0, "plain: last token")
        fills_pass = False
        if mode == AUTO:
            prices = self.auto.prices(at)
            offers: list[Offer] = []
            for drafter in self.drafters.for_auto:
                offer = drafter.offer(context, k_cap, prices)
                if offer is not None:
                    offers.append(offer)
            choice = self.auto.choose(offers, prices, at)
            fills_pass = any(o.fills_pass for o in offers if o.source == choice.mode)
        else:
            choice = self._fixed.choose(mode, min(controls.k, k_cap))
        k = min(choice.k, k_cap)
        if choice.mode == PLAIN or k <= 0:
            return _NO_DRAFT, choice
        drafter = self.drafters[choice.mode]
        if fills_pass:
            # Auto pays for the cheapest pass holding k + 1 rows: the drafter may use them all.
            k = min(self.auto.pass_size(k + 1, at), k_cap + 1) - 1
        draft = drafter.propose(context, k, controls.sampling, rng)
        return draft, choice

    def _fill(self, context: Sequence[int], draft: Draft, k_cap: int, at: RoundContext) -> Draft:
        """The draft grown to the cheapest pass at or above its size (see pass_size).

        A pass of 16 can cost less than one of 15 on a CPU (kernels work on rows in groups):
        the extra rows carry a copy on from the draft's end, or else a repeat of its last
        token (see fill_tokens). Any token in a row is checked exactly like the others, so
        output is unchanged; more rows can only keep more.
        """
        if not draft.tokens:
            return draft  # plain chose not to draft
        # The extra rows lengthen a tree's main path.
        used = draft_rows(draft)
        rows = min(self.auto.pass_size(used, at), k_cap + 1)
        extra = rows - used
        if extra <= 0:
            return draft
        more = fill_tokens(context, draft, extra)
        probs = draft.probs
        if probs is not None:
            # A filled row is a deterministic proposal: q is one-hot at its token.
            probs = (*probs, *(_one_hot(token, self.target.n_vocab) for token in more))
        return replace(draft, tokens=(*draft.tokens, *more), probs=probs)

    def _verify_tree(
        self, draft: Draft, last: int, sampling: SamplingParams, rng: np.random.Generator
    ) -> tuple[Draft, Verdict, int]:
        """Check the draft and its branches in one pass (greedy only) and keep the path that
        goes furthest; returns it as the round's draft, its verdict, and the pass's rows.

        Each path is verified exactly as a lone draft would be, so the kept tokens and the
        next one are the target's argmax: the output is plain decoding's.
        """
        target = self.target
        paths = [draft.tokens, *draft.branches][: target.max_branches]
        logits = target.decode_tree([[last, *path] for path in paths])
        verdicts = [
            verify(path, None, rows, sampling, rng)
            for path, rows in zip(paths, logits, strict=True)
        ]
        best = max(range(len(paths)), key=lambda b: (verdicts[b].n_accepted, -b))
        target.keep_path(best, 1 + verdicts[best].n_accepted)
        n_rows = 1 + len(tree_prefixes(paths))
        return replace(draft, tokens=paths[best], branches=()), verdicts[best], n_rows

    def _ms_since(self, start: float) -> float:
        return (self.clock() - start) * 1000.0

    def _text_of(self, tokens: Sequence[int]) -> str:
        return b"".join(self.target.piece(t) for t in tokens).decode("utf-8", errors="replace")

    def _final(
        self,
        round_index: int,
        stats: Stats,
        decode_start: float,
        stop: StopReason,
        stops: StopStringFilter,
    ) -> RoundResult:
        """A round with no target pass: carries the stop reason and any held-back text."""
        held, _ = stops.filter([], final=True)
        stats = replace(
            stats,
            elapsed_s=self.clock() - decode_start,
            emitted=stats.emitted + len(held),
        )
        return RoundResult(
            index=round_index,
            events=tuple(held),
            rejected=(),
            rejected_text="",
            drafted=0,
            accepted=0,
            draft_ms=0.0,
            verify_ms=0.0,
            choice=PolicyChoice(PLAIN, 0, stop.value),
            temperature=0.0,
            stats=stats,
            stop=stop,
            text="".join(e.text for e in held),
        )


_NO_DRAFT = Draft((), None, 0.0, PLAIN)


def tree_prefixes(paths: Sequence[Sequence[int]]) -> set[tuple[int, ...]]:
    """Every distinct non-empty prefix of the paths: a tree's draft rows."""
    return {tuple(path[:i]) for path in paths for i in range(1, len(path) + 1)}


def draft_rows(draft: Draft) -> int:
    """Rows the pass checking `draft` holds: the last token and every distinct prefix of its
    paths (a draft without branches: its tokens)."""
    if not draft.branches:
        return 1 + len(draft.tokens)
    return 1 + len(tree_prefixes([draft.tokens, *draft.branches]))


def _one_hot(token: int, n_vocab: int) -> np.ndarray:
    q = np.zeros(n_vocab, dtype=np.float64)
    q[token] = 1.0
    return q


def _add_round(
    stats: Stats,
    *,
    drafted: int,
    accepted: int,
    emitted: int,
    draft_ms: float,
    verify_ms: float,
    elapsed_s: float,
    position_kept: int,
) -> Stats:
    """Stats after one more round: totals plus per-position acceptance counts."""
    width = max(len(stats.position_drafted), drafted)
    pos_drafted = list(stats.position_drafted) + [0] * (width - len(stats.position_drafted))
    pos_accepted = list(stats.position_accepted) + [0] * (width - len(stats.position_accepted))
    for position in range(drafted):
        pos_drafted[position] += 1
        if position < min(position_kept, accepted):
            pos_accepted[position] += 1
    return replace(
        stats,
        rounds=stats.rounds + 1,
        drafted=stats.drafted + drafted,
        accepted=stats.accepted + accepted,
        emitted=stats.emitted + emitted,
        draft_ms=stats.draft_ms + draft_ms,
        verify_ms=stats.verify_ms + verify_ms,
        elapsed_s=elapsed_s,
        position_drafted=tuple(pos_drafted),
        position_accepted=tuple(pos_accepted),
    )


def rollback_refusal(target: Target, draft: DraftModel | None) -> str:
    """Why speculation cannot use this pair as it is, or "" when it can.

    Speculation drops rejected drafts from the caches after every round. Recurrent and
    hybrid models (Mamba, Qwen3.5, Jamba...) do it with llama.cpp's state snapshots or a
    checkpoint of their state (see engine/llamacpp/recurrent_state.py); a model where
    llama.cpp can do neither could only re-read the whole context: drafting for such a
    target is refused, and such a draft model is left unused.
    """
    if not target.can_rollback:
        return (
            f"{target.path.name} is a recurrent or hybrid model, whose cache cannot drop "
            "rejected drafts: it decodes without drafting"
        )
    if draft is not None and not draft.can_rollback:
        return (
            f"the draft model {draft.path.name} is a recurrent or hybrid model, whose cache "
            "cannot drop rejected drafts: it is not used (drafters without a model still draft)"
        )
    return ""


def fill_tokens(context: Sequence[int], draft: Draft, extra: int) -> list[int]:
    """`extra` tokens to lengthen `draft`'s main path into rows a cheap pass leaves over: what
    followed where the text, draft included, ended the same way before (more of a copy, a
    repeating stretch going on), else repeats of the draft's last token."""
    text = [*context, *draft.tokens]
    start, length = locate(text)
    more = [int(t) for t in text[start : start + extra]] if length else []
    return more + [draft.tokens[-1]] * (extra - len(more))
