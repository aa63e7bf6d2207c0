"""Replay: recorded answers re-priced under another machine's cost table: auto and the ceiling."""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from specchat.bench.trace import DRAFT_DEPTH, AnswerTrace, agreement
from specchat.engine.cost_table import MachineCosts
from specchat.engine.drafting import Acceptance, Draft, Drafter, Offer, Outcome
from specchat.engine.drafting.model import MIN_CONFIDENCE
from specchat.engine.types import SamplingParams

#: Longest draft `auto` may ask of prompt lookup (a pass of 64) and of the draft model.
LOOKUP_K = 63
DRAFT_K = DRAFT_DEPTH

#: Cost files shipped with SpecChat (resources/costs), by the name `--costs` accepts.
SHIPPED = {
    "cpu": "cpu-2core-qwen1.5b-q4_k_m.json",
    "gpu": "gpu-rtx3090-8b-q4_0.json",
}


class ReplayError(ValueError):
    """A rounds file or cost file cannot be replayed; the message says why."""


def shipped_costs(name: str) -> Path:
    """The path of a shipped cost file by its short name ('cpu', 'gpu')."""
    from specchat import paths

    return paths.resource("costs", SHIPPED[name])


def read_costs(spec: str) -> MachineCosts:
    """A cost file by path, or a shipped one by short name."""
    from specchat.engine.cost_table import CostTableError

    path = shipped_costs(spec) if spec in SHIPPED else Path(spec)
    try:
        costs = MachineCosts.read(path)
    except CostTableError as error:
        raise ReplayError(str(error)) from None
    return costs


def read_traces(path: Path) -> list[AnswerTrace]:
    """The traces in a bench's rounds.jsonl (one per prompt), with clear errors."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise ReplayError(f"cannot read {path}: {error.strerror or error}") from None
    traces = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if isinstance(row, dict) and row.get("record") == "trace":
                traces.append(AnswerTrace.from_json(row))
        except (ValueError, KeyError, TypeError) as error:
            raise ReplayError(f"{path}, line {number}: not a usable record ({error})") from None
    if not traces:
        raise ReplayError(
            f"{path} holds no answer traces: it must be a rounds.jsonl written by a "
            "`specchat bench` that ran plain at temperature 0"
        )
    return traces


@dataclass(frozen=True)
class ReplayResult:
    """One recorded answer priced under a cost table.

    Attributes:
        prompt: the prompt's id.
        tokens: answer length.
        plain_ms: plain decoding's time (one pass of 1 per token).
        auto_ms: the auto policy's time, replayed.
        ceiling_ms: the least time any sequence of plain, lookup and draft-model rounds
            could take on this answer with these costs, choosing every round knowing the
            answer (see ceiling_ms(): a bound no policy that must guess reaches).
        fixed_ms, fixed: the best single fixed setting for the whole answer, chosen knowing
            it (see best_fixed_ms()), and which it was.
        rounds: auto's rounds per drafter ('plain' included).
        kept: tokens auto's drafts had kept, per drafter.
        sizes: auto's target passes by size.
    """

    prompt: str
    tokens: int
    plain_ms: float
    auto_ms: float
    ceiling_ms: float
    fixed_ms: float = 0.0
    fixed: str = ""
    rounds: dict[str, int] = field(default_factory=dict)
    kept: dict[str, int] = field(default_factory=dict)
    sizes: dict[int, int] = field(default_factory=dict)

    @property
    def speedup(self) -> float:
        return self.plain_ms / self.auto_ms if self.auto_ms > 0 else 1.0

    @property
    def ceiling(self) -> float:
        return self.plain_ms / self.ceiling_ms if self.ceiling_ms > 0 else 1.0

    @property
    def share_of_ceiling(self) -> float:
        return self.speedup / self.ceiling

    @property
    def best_fixed(self) -> float:
        return self.plain_ms / self.fixed_ms if self.fixed_ms > 0 else 1.0

    @property
    def main_drafter(self) -> str:
        """The drafter whose drafts kept the most tokens ('plain' if none kept any)."""
        drafted = {mode: n for mode, n in self.kept.items() if n > 0}
        return max(drafted, key=lambda mode: drafted[mode]) if drafted else "plain"

    def to_json(self) -> dict[str, object]:
        return {
            "prompt": self.prompt,
            "tokens": self.tokens,
            "plain_ms": round(self.plain_ms, 2),
            "auto_ms": round(self.auto_ms, 2),
            "ceiling_ms": round(self.ceiling_ms, 2),
            "auto_speedup": round(self.speedup, 4),
            "ceiling_speedup": round(self.ceiling, 4),
            "share_of_ceiling": round(self.share_of_ceiling, 4),
            "best_fixed_speedup": round(self.best_fixed, 4),
            "best_fixed": self.fixed,
            "rounds": self.rounds,
            "kept": self.kept,
            "main_drafter": self.main_drafter,
            "pass_sizes": {str(n): c for n, c in sorted(self.sizes.items())},
        }


def _draft_ms(costs: MachineCosts) -> float | None:
    return costs.draft_token_ms


def suffix_proposals(trace: AnswerTrace) -> list[tuple[int, int]]:
    """Per answer position, the suffix drafter's (proposal length, tokens kept) over this
    chat: its main path's length, and what its best branch — or the copy carried through the
    answer's substitutions — keeps (the ceiling's optimism)."""
    from specchat.engine.drafting.matching import locate
    from specchat.engine.drafting.substitutions import Substitutions
    from specchat.engine.drafting.suffix import MIN_SHARE, TREE_BRANCHES
    from specchat.engine.suffix_index import SuffixIndex

    index = SuffixIndex()
    substitutions = Substitutions(locate)
    prompt, answer = list(trace.prompt_tokens), list(trace.answer)
    index.prepare(prompt)
    found = []
    for i in range(len(answer)):
        context = [*prompt, *answer[:i]]
        index.sync(context)
        found_paths = index.propose(LOOKUP_K, branches=TREE_BRANCHES, min_share=MIN_SHARE)
        substitutions.track(context, found_paths[0].match_len if found_paths else 0)
        paths = [p.tokens for p in found_paths]
        carried = substitutions.copy(context, LOOKUP_K)
        if carried is not None and carried[0]:
            paths.append(carried[0])
        if not paths:
            found.append((0, 0))
            continue
        kept = max(agreement(path, answer[i:]) for path in paths)
        found.append((max(len(path) for path in paths), kept))
    return found


def ceiling_ms(trace: AnswerTrace, costs: MachineCosts) -> float:
    """The least time to write `trace.answer` with plain, copied (lookup, suffix index) and
    draft-model rounds.

    A dynamic programme over positions, knowing the answer: each round picks plain, a copy
    or a draft-model draft of any length at the cheapest pass holding it (a suffix tree is
    priced as its longest path, with what its best branch keeps). While the draft model is in
    use, text written by other rounds must be caught up; charging every round's tokens
    beyond two at the catch-up rate is never more than a real catch-up costs, so no causal
    policy can beat this.
    """
    n = len(trace.answer)
    suffix = suffix_proposals(trace)
    start = len(trace.prompt_tokens)
    draft_token = _draft_ms(costs) if trace.draft is not None else None
    catchup = costs.catchup_ms(3) / 3 if draft_token is not None else 0.0
    inf = float("inf")
    # never[i]: from position i on without the draft model; using[i]: with it kept in step.
    never = [0.0] * (n + 1)
    using = [0.0 if draft_token is not None else inf] * (n + 1)
    for i in range(n - 1, -1, -1):
        room = n - i - 1
        depth = start + i  # passes cost more deeper in the text
        one = costs.target.target_ms(1, depth)
        assert one is not None
        moves = [(one, i + 1)]
        for length, kept in ((trace.lookup_len[i], trace.lookup_kept(i)), suffix[i]):
            for k in range(1, min(length, room, LOOKUP_K) + 1):
                ms = costs.target.target_ms(k + 1, depth)
                assert ms is not None
                moves.append((ms, i + min(k, kept) + 1))
        never[i] = min(ms + never[j] for ms, j in moves)
        if draft_token is None:
            continue
        best = min(ms + max(0, j - i - 2) * catchup + using[j] for ms, j in moves)
        kept = trace.draft_kept(i)
        for k in range(1, min(DRAFT_K, room) + 1):
            ms = costs.target.target_ms(k + 1, depth)
            assert ms is not None
            j = i + min(k, kept) + 1
            best = min(best, ms + k * draft_token + min(using[j], never[j]))
        using[i] = best
    return min(never[0], using[0])


def best_fixed_ms(trace: AnswerTrace, costs: MachineCosts) -> tuple[float, str]:
    """The least time of one fixed setting for the whole answer, chosen knowing it:
    plain, lookup with K = 1 … 63 or the draft model with K = 1 … 16 (what a person tuning
    the mode and K by hand for this very answer would reach). Returns (ms, "mode K")."""
    n = len(trace.answer)
    best = (plain_ms(trace, costs), "plain")
    options = [("lookup", k) for k in range(1, LOOKUP_K + 1)]
    if trace.draft is not None and costs.draft_token_ms is not None:
        options += [("draft", k) for k in range(1, DRAFT_K + 1)]
    for mode, k in options:
        i, spent = 0, 0.0
        while i < n and spent < best[0]:
            room = min(k, n - i - 1)
            if mode == "lookup":
                drafted = min(room, trace.lookup_len[i])
                kept = min(drafted, trace.lookup_kept(i))
                extra = 0.0
            else:
                drafted = room
                kept = min(drafted, trace.draft_kept(i))
                extra = drafted * (costs.draft_token_ms or 0.0)
            ms = costs.target.target_ms(drafted + 1, len(trace.prompt_tokens) + i)
            assert ms is not None
            spent += ms + extra
            i += kept + 1
        if i >= n and spent < best[0]:
            best = (spent, f"{mode} K={k}")
    return best


def plain_ms(trace: AnswerTrace, costs: MachineCosts) -> float:
    """Plain decoding's time for the answer: one pass a token, each a token deeper."""
    start, total = len(trace.prompt_tokens), 0.0
    for i in range(len(trace.answer)):
        one = costs.target.target_ms(1, start + i)
        assert one is not None
        total += one
    return total


class _RecordedDraftModel(Drafter):
    """The draft model as recorded in a trace: its greedy proposals, priced by a cost table.

    Learns like the live draft model (the base acceptance estimate, probed by `auto`), and
    tracks what its cache would hold, so a catch-up after rounds it sat out is priced.
    """

    name = "draft"
    label = "Draft model"
    priority = 20
    needs_model = True
    probed = True

    def __init__(self, trace: AnswerTrace, costs: MachineCosts) -> None:
        super().__init__()
        self.min_confidence = MIN_CONFIDENCE
        self.acceptance = Acceptance.prior(0.6, 0.6)  # as DraftModelDrafter's
        self.trace = trace
        self.costs = costs
        self._synced = 0  # until prepare() evaluates the prompt (if auto readies it)
        self._drafted_at = 0

    def prepare(self, prompt: Sequence[int], *, eager: bool) -> None:
        if eager:
            self._synced = len(prompt) - 1

    def _lag(self, context: Sequence[int]) -> int:
        return len(context) - self._synced

    def token_ms(self, plain_ms: float) -> float:
        token = self.costs.draft_token_ms
        return plain_ms / 3.0 if token is None else token

    def offer(self, context: Sequence[int], k_cap: int) -> Offer | None:
        k_max = min(DRAFT_K, k_cap)
        if k_max <= 0:
            return None
        curve = self.expected_tokens_curve(k_max)
        extra = self.costs.catchup_ms(self._lag(context))
        return Offer(k_max, curve, extra, f"α ≈ {self.acceptance.alpha:.2f}")

    def propose(
        self, context: Sequence[int], k: int, sampling: SamplingParams, rng: np.random.Generator
    ) -> Draft:
        i = len(context) - len(self.trace.prompt_tokens)
        recorded = self.trace.draft[i] if self.trace.draft is not None else ()
        k = self._confident_length(i, k)
        # Past the first refused token the proposal was not recorded: it is never kept.
        tokens = (*recorded[:k], *[-1] * (k - min(k, len(recorded))))
        lag = self._lag(context)
        catchup_ms = self.costs.catchup_ms(lag)
        ms = k * self.token_ms(0.0) + catchup_ms
        self._drafted_at = len(context)
        return Draft(tokens, None, ms, self.name, catchup=lag, catchup_ms=catchup_ms)

    def _confident_length(self, i: int, k: int) -> int:
        """Where the live draft model's confidence stop ends a draft of k at position i.

        Its confidence at its t-th token is recorded while its first t tokens agree with the
        answer; past its first miss it is unknown, and the draft is taken to go on (the
        costlier guess, and those tokens are never kept anyway).
        """
        confidence = self.trace.draft_confidence
        if confidence is None or self.min_confidence <= 0:
            return k
        agreeing = self.trace.draft_kept(i)
        for t in range(1, min(k, agreeing + 1, len(confidence) - i)):
            if confidence[i + t] < self.min_confidence:
                return t
        return k

    def observe(self, outcome: Outcome) -> None:
        super().observe(outcome)
        drafted = len(outcome.draft.tokens)
        if outcome.draft.source == self.name and drafted:
            # Its cache holds the kept drafts, all but the last drafted token.
            self._synced = self._drafted_at + min(outcome.accepted, drafted - 1)


def replay_auto(trace: AnswerTrace, costs: MachineCosts) -> tuple[float, Counter, Counter, Counter]:
    """Time the auto policy takes on `trace` under `costs`: (ms, rounds, kept, pass sizes).

    The real policy and the real draft-free drafters `auto` asks (the suffix index over this
    chat) run on the recorded text; the draft model's proposals come from the trace.
    Each pass is sized as the decoder sizes it (the cheapest size holding the draft, extra
    rows filled as `fill_tokens` fills them; a draft-model round's extra rows count as
    keeping nothing, since what would fill them live was not recorded), and a suffix tree
    keeps its branch that goes furthest.
    """
    from specchat.engine.decoder import draft_rows, fill_tokens
    from specchat.engine.drafting import PLAIN, PromptLookupDrafter, SuffixDrafter, auto_drafters
    from specchat.engine.schedule import AutoPolicy
    from specchat.engine.types import PolicyChoice

    costs = copy.deepcopy(costs)
    policy = AutoPolicy(gpu=costs.target.gpu, costs=costs)
    built: list[Drafter] = [SuffixDrafter(), PromptLookupDrafter()]
    if trace.draft is not None and costs.draft_token_ms is not None:
        built.append(_RecordedDraftModel(trace, costs))
    drafters = auto_drafters(built)
    by_name = {drafter.name: drafter for drafter in drafters}
    policy.track(drafters)
    prompt, answer = list(trace.prompt_tokens), list(trace.answer)
    text = [*prompt, *answer]
    for drafter in drafters:
        # As the decoder does: a drafter with a model prices reading the prompt in its offer.
        offer = drafter.offer(prompt, len(answer)) if drafter.needs_model else None
        drafter.prepare(prompt, eager=policy.worth_readying(drafter, offer))
    greedy, rng = SamplingParams(), np.random.default_rng(0)
    n = len(answer)
    i, spent = 0, 0.0
    rounds: Counter = Counter()
    kept_by: Counter = Counter()
    sizes: Counter = Counter()
    while i < n:
        context = text[: len(prompt) + i]
        costs.context = len(context)  # as the decoder does: passes priced at this depth
        k_cap = min(LOOKUP_K, n - i - 1)
        offers = []
        if k_cap > 0:
            for drafter in drafters:
                offer = drafter.offer(context, k_cap)
                if offer is not None:
                    offers.append((drafter, offer))
            choice = policy.choose(offers)
        else:
            choice = PolicyChoice(PLAIN, 0, "plain: last token")
        k = min(choice.k, k_cap)
        made = Draft((), None, 0.0, PLAIN)
        rows, model_ms = 1, 0.0
        if choice.mode != PLAIN and k > 0:
            drafter = by_name[choice.mode]
            if drafter.fills_pass:
                k = min(costs.pass_size(k + 1), k_cap + 1) - 1
            made = drafter.propose(context, k, greedy, rng)
            used = draft_rows(made)
            rows = min(costs.pass_size(used), k_cap + 1)
            if drafter.needs_model:
                model_ms = made.ms  # a copying drafter's lookups cost next to nothing
            elif made.tokens and rows > used:
                more = fill_tokens(context, made, rows - used)
                made = replace(made, tokens=(*made.tokens, *more))
            rows = max(rows, draft_rows(made))
            # Greedy keeps the path that goes furthest (one path unless a tree was drafted).
            paths = [made.tokens, *made.branches]
            made = replace(made, tokens=max(paths, key=lambda p: agreement(p, answer[i:])))
        drafted = len(made.tokens)
        kept = agreement(made.tokens, answer[i:])
        verify_ms = costs.cost_ms(rows)
        assert verify_ms is not None
        spent += verify_ms + model_ms
        rounds[made.source if drafted else PLAIN] += 1
        kept_by[made.source if drafted else PLAIN] += kept
        sizes[rows] += 1
        i += min(kept + 1, n - i)
        outcome = Outcome(text[: len(prompt) + i], made, kept, trace.margin_before(i))
        for drafter in drafters:
            drafter.observe(outcome)
        policy.observe(
            choice,
            batch=rows,
            verify_ms=verify_ms,
            drafted=drafted,
            accepted=kept,
            drafter=by_name.get(made.source),
        )
    return spent, rounds, kept_by, sizes


def replay(traces: Iterable[AnswerTrace], costs: MachineCosts) -> list[ReplayResult]:
    """Auto and the ceiling on every trace under `costs`."""
    one = costs.target_ms(1)
    if one is None:
        raise ReplayError("the cost table has no pass of 1 token")
    # The cost file is how this machine's passes run: every size counts as seen in rounds.
    costs = copy.deepcopy(costs)
    costs.target.seen = dict.fromkeys(costs.target.pass_ms, 1)
    results = []
    for trace in traces:
        if not trace.answer:
            continue
        auto, rounds, kept, sizes = replay_auto(trace, costs)
        fixed_ms, fixed = best_fixed_ms(trace, costs)
        results.append(
            ReplayResult(
                prompt=trace.prompt,
                tokens=len(trace.answer),
                plain_ms=plain_ms(trace, costs),
                auto_ms=auto,
                ceiling_ms=ceiling_ms(trace, costs),
                fixed_ms=fixed_ms,
                fixed=fixed,
                rounds=dict(rounds),
                kept=dict(kept),
                sizes=dict(sizes),
            )
        )
    return results


def summary_lines(results: Sequence[ReplayResult], costs: MachineCosts) -> list[str]:
    """A table for the terminal: per prompt, auto and the ceiling against plain."""
    from specchat.bench.runner import geomean

    lines = [f"costs: {costs.name or 'unnamed'}"]
    one = costs.target_ms(1)
    draft = costs.draft_token_ms
    if one:
        shape = ", ".join(
            f"n={n}: {costs.target_ms(n) / one:.2f}×"  # type: ignore[operator]
            for n in (2, 4, 8, 16, 32, 64)
            if n <= costs.target.sizes[-1]
        )
        lines.append(f"target pass {one:.1f} ms ({shape})")
        if draft is not None:
            lines.append(f"draft token {draft:.1f} ms ({draft / one:.2f}× a target token)")
    lines.append(
        f"{'prompt':<22} {'auto':>6} {'best fixed':>19} {'ceiling':>8} {'share':>6}  auto's rounds"
    )
    for r in results:
        used = ", ".join(f"{mode} {count}" for mode, count in sorted(r.rounds.items()))
        fixed = f"{r.best_fixed:5.2f}× {r.fixed:<12}"
        lines.append(
            f"{r.prompt:<22} {r.speedup:5.2f}× {fixed:>19} {r.ceiling:7.2f}× "
            f"{r.share_of_ceiling:6.1%}  {used}"
        )
    if results:
        lines.append(
            f"{'geometric mean':<22} {geomean([r.speedup for r in results]):5.2f}× "
            f"{geomean([r.best_fixed for r in results]):5.2f}×{'':<14}"
            f"{geomean([r.ceiling for r in results]):7.2f}× "
            f"{geomean([r.share_of_ceiling for r in results]):6.1%}"
        )
    lines.append(
        "best fixed: one mode and K for the whole answer, chosen knowing it; ceiling: every "
        "round chosen knowing the answer (no policy that must guess reaches it)"
    )
    return lines
