"""Replay: recorded answers re-priced under another machine's cost table: auto and the ceiling."""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from specchat.bench.hindsight.bounds import best_fixed_ms, oracle, plain_ms
from specchat.bench.hindsight.ledger import Ledger, attribute, drafts_cost, ledger_lines
from specchat.bench.hindsight.recorded_target import RecordedTarget, VirtualClock
from specchat.bench.live.trace import AnswerTrace, column_kinds
from specchat.engine.costs.machine import MachineCosts
from specchat.engine.drafting import MAX_LOOKUP_K, Estimates
from specchat.engine.types import Controls, RoundResult

#: Longest draft `auto` may ask for (a pass of MAX_LOOKUP_K rows).
LONGEST = MAX_LOOKUP_K - 1

#: Cost files shipped with SpecChat (resources/costs), by the name `--costs` accepts.
SHIPPED = {
    "cpu": "cpu-2core-qwen1.5b-q4_k_m.json",
    # The 2-core AVX-512 Xeon's whole curve (docs/costs.md): rows cheaper than "cpu"'s, so the
    # draft model pays at a fixed K of 3 on new code.
    "xeon": "cpu-2core-xeon-avx512-qwen1.5b-q4_k_m.json",
    "gpu": "gpu-rtx3090-8b-q4_0.json",
    # Measured by SpecChat itself on an H200 (docs/gpu.md): the same 8B/1B pair as "gpu",
    # the default pair's shapes, and a Qwen3.5 hybrid with its MTP head.
    "h200": "gpu-h200-llama8b-q4_0.json",
    "h200-qwen2.5": "gpu-h200-qwen2.5-1.5b-q4_k_m.json",
    "h200-qwen3.5": "gpu-h200-qwen3.5-4b-q4_k_m.json",
}
#: The table where no drafting can pay, by the name `--costs` accepts (see nothing_pays).
NOTHING_PAYS = "nothing-pays"


class ReplayError(ValueError):
    """A rounds file or cost file cannot be replayed; the message says why."""


def shipped_costs(name: str) -> Path:
    """The path of a shipped cost file by its short name ('cpu', 'gpu')."""
    from specchat import paths

    return paths.resource("costs", SHIPPED[name])


def nothing_pays(base: str = "cpu") -> MachineCosts:
    """The shipped `base` table with every pass of n rows at n one-token passes: checking a
    draft costs what writing its tokens plainly would, so no draft can beat plain, and what
    `auto` loses there is the price of its guesses (probes, hopeful drafts)."""
    costs = read_costs(base)
    one = costs.target.pass_ms[1]
    costs.target.pass_ms = {n: one * n for n in costs.target.sizes}
    costs.target.seen = {}
    costs.name = f"nothing pays: a pass of n rows costs n one-token passes ({base} table's token)"
    costs.sources = (*costs.sources, "Every pass of n rows set to n one-token passes.")
    return costs


def read_costs(spec: str) -> MachineCosts:
    """A cost file by path, a shipped one by short name, or the table where nothing pays."""
    from specchat.engine.costs.table import CostTableError

    if spec == NOTHING_PAYS:
        return nothing_pays()
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
        ceiling_ms: the least time any sequence of plain, copied, draft-model and
            draft-head rounds could take on this answer with these costs, choosing every
            round knowing the answer (see ceiling_ms(): a bound no policy that must guess
            reaches).
        fixed_ms, fixed: the best single fixed setting for the whole answer, chosen knowing
            it (see best_fixed_ms()), and which it was.
        rounds: auto's rounds per drafter ('plain' included).
        kept: tokens auto's drafts had kept, per drafter.
        sizes: auto's target passes by size.
        ledger: where auto's time over the ceiling's went, by cause (see bench/hindsight/ledger.py).
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
    ledger: Ledger = field(default_factory=Ledger)

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
            "ledger": self.ledger.to_json(),
        }


def dense(trace: AnswerTrace) -> tuple[AnswerTrace, int]:
    """`trace` with its token ids numbered 0, 1, … in order of first use, and how many there
    are: a replayed pass's logits then span the trace's tokens, not the whole vocabulary.
    Drafters see only ids, so the renumbering changes nothing they do."""
    ids: dict[int, int] = {}

    def renumber(tokens: Sequence[int]) -> tuple[int, ...]:
        return tuple(ids.setdefault(int(t), len(ids)) for t in tokens)

    prompt, answer = renumber(trace.prompt_tokens), renumber(trace.answer)
    columns = {
        name: trace.columns[name].renumbered(renumber)
        for name, _ in column_kinds()
        if name in trace.columns
    }
    renamed = replace(trace, prompt_tokens=prompt, answer=answer, columns=columns)
    return renamed, len(ids)


@dataclass(frozen=True)
class ReplayedAnswer:
    """Auto's rounds on one recorded answer, with what the draft model spent outside them.

    Attributes:
        rounds: the decoder's rounds, in order (those that made a pass).
        catchup_ms: per round, the draft model's catch-up inside its draft time.
        readying_ms: the draft model's prompt read before the first round (no round's).
        clock_ms: the replay's clock at the answer's end: every pass and draft it priced.
    """

    rounds: tuple[RoundResult, ...]
    catchup_ms: tuple[float, ...]
    readying_ms: float = 0.0
    clock_ms: float = 0.0


def replay_rounds(trace: AnswerTrace, costs: MachineCosts) -> list[RoundResult]:
    """The decoder's own round loop on `trace` under `costs`, with the auto policy: its rounds
    (see replay_answer)."""
    return list(replay_answer(trace, costs).rounds)


def replay_answer(
    trace: AnswerTrace,
    costs: MachineCosts,
    *,
    controls: Controls | None = None,
    estimates: Estimates | None = None,
) -> ReplayedAnswer:
    """The decoder's own round loop on `trace` under `costs`, with the auto policy (or the
    mode and K of `controls`); `estimates`: where the drafters' learnt estimates start (by
    default their priors).

    The target is the recorded answer (RecordedTarget: its passes priced by the cost table);
    each column the trace holds plays back what its drafter drafts with, where the cost
    file prices it (TraceColumn.played_model, played_head): a drafter that runs the draft
    model runs it as the trace recorded it, a head drafter drafts with its head as recorded.
    Everything else
    (the policy, the drafters, how a pass is sized and filled, trees) is what runs live.
    """
    from specchat.engine.decoding.decoder import SpeculativeDecoder
    from specchat.engine.decoding.schedule import AutoPolicy
    from specchat.engine.drafting import AUTO, LoadedPair
    from specchat.engine.types import GenerationRequest

    trace, n_ids = dense(trace)
    costs = copy.deepcopy(costs)
    clock = VirtualClock()
    n_vocab = n_ids + 1  # and one token no answer holds
    target = RecordedTarget(trace, costs, clock, n_vocab=n_vocab)
    # Each column plays back what its drafter drafts with, where the costs price it.
    model = None
    heads = {}
    for name, _ in column_kinds():
        column = trace.columns.get(name)
        if column is None:
            continue
        played = column.played_model(trace, costs, clock, n_vocab)
        model = played if played is not None else model
        head = column.played_head(trace, costs, target, clock, n_vocab - 1)
        if head is not None:
            heads[name] = head
    pair = LoadedPair.of(
        target,
        model,
        costs=costs,
        clock=clock,
        heads=heads,
        estimates=estimates,
    )
    decoder = SpeculativeDecoder(pair, auto=AutoPolicy(gpu=costs.target.gpu, costs=costs))
    request = GenerationRequest(
        prompt_tokens=trace.prompt_tokens,
        max_tokens=len(trace.answer),
        controls=controls or Controls(mode=AUTO),
    )
    rounds, catchups = [], []
    caught_up = 0.0
    for r in decoder.generate(request):
        # A round's catch-up is what the model's running total grew by while it ran.
        now = model.catchup_ms if model is not None else 0.0
        if r.rows:
            rounds.append(r)
            catchups.append(now - caught_up)
        caught_up = now
    readying = model.read_ms if model is not None else 0.0
    return ReplayedAnswer(tuple(rounds), tuple(catchups), readying, clock.ms)


def replay_auto(
    trace: AnswerTrace, costs: MachineCosts, rounds_run: Sequence[RoundResult] | None = None
) -> tuple[float, Counter, Counter, Counter]:
    """Time the auto policy takes on `trace` under `costs`: (ms, rounds, kept, pass sizes),
    the rounds and kept tokens by the drafter chosen. A drafter that runs the draft model or
    a head is charged its recorded time; a copying drafter's lookups cost next to nothing.
    `rounds_run`: the rounds, where the caller has replayed them already."""
    from specchat.engine.drafting import PLAIN

    spent = 0.0
    rounds: Counter = Counter()
    kept: Counter = Counter()
    sizes: Counter = Counter()
    if rounds_run is None:
        rounds_run = replay_rounds(trace, costs)
    for r in rounds_run:
        source = r.choice.mode if r.drafted else PLAIN
        spent += r.verify_ms + (r.draft_ms if drafts_cost(r.choice.mode) else 0.0)
        rounds[source] += 1
        kept[source] += r.accepted
        sizes[r.rows] += 1
    return spent, rounds, kept, sizes


def replay(
    traces: Iterable[AnswerTrace], costs: MachineCosts, *, estimates: Estimates | None = None
) -> list[ReplayResult]:
    """Auto and the ceiling on every trace under `costs` (`estimates`: where the drafters'
    learnt estimates start, see replay_answer)."""
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
        replayed = replay_answer(trace, costs, estimates=estimates)
        auto, rounds, kept, sizes = replay_auto(trace, costs, replayed.rounds)
        fixed_ms, fixed = best_fixed_ms(trace, costs)
        best = oracle(trace, costs)
        ledger = attribute(
            trace,
            costs,
            replayed.rounds,
            replayed.catchup_ms,
            best,
            readying_ms=replayed.readying_ms,
        )
        results.append(
            ReplayResult(
                prompt=trace.prompt,
                tokens=len(trace.answer),
                plain_ms=plain_ms(trace, costs),
                auto_ms=auto,
                ceiling_ms=best.ms,
                fixed_ms=fixed_ms,
                fixed=fixed,
                rounds=dict(rounds),
                kept=dict(kept),
                sizes=dict(sizes),
                ledger=ledger,
            )
        )
    return results


def head_lines(costs: MachineCosts, one_ms: float) -> list[str]:
    """A line per head the costs price: its drafted token against a target token."""
    from specchat.engine.drafting import mode_info, mode_names

    lines = []
    for name in sorted(costs.heads):
        ms = costs.head_token_ms(name)
        if ms is not None:
            label = mode_info(name).label if name in mode_names() else name
            lines.append(f"{label} ({name}) token {ms:.2f} ms ({ms / one_ms:.2f}× a target token)")
    return lines


def summary_lines(results: Sequence[ReplayResult], costs: MachineCosts) -> list[str]:
    """A table for the terminal: per prompt, auto and the ceiling against plain."""
    from specchat.bench.live.runner import geomean

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
        lines += head_lines(costs, one)
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
    if results:
        lines += ["", *ledger_lines([(r.prompt, r.ledger) for r in results])]
    return lines
