"""What any policy could reach on a recorded answer, knowing it: the ceiling over every
drafter's column (engine/drafting/trace_column.py: what each recorded, or its text gives)
and the best fixed setting. It knows no drafter: each column says what it proposes, what is
kept, what a token costs and whether its drafter must be kept in step (catches up)."""

from __future__ import annotations

from dataclasses import dataclass

from specchat.bench.live.trace import AnswerTrace, column_kinds
from specchat.engine.costs.machine import MachineCosts
from specchat.engine.drafting.trace_column import TraceColumn

#: The ceiling's source that drafts nothing; every other source is a drafter's column, by
#: the drafter's name.
PLAIN_SOURCE = "plain"


@dataclass(frozen=True)
class Source:
    """One column the ceiling drafts from, with its price.

    Attributes:
        column: what it proposes at each position (the trace's, or worked out from its text).
        token_ms: a drafted token's time.
    """

    column: TraceColumn
    token_ms: float

    @property
    def name(self) -> str:
        return self.column.name


def sources(trace: AnswerTrace, costs: MachineCosts, *, derived: bool = True) -> list[Source]:
    """The ceiling's sources on `trace` under `costs`, in its order: every column the trace
    records or (`derived`) its text gives, where the costs price its drafted tokens."""
    found = []
    for name, kind in column_kinds():
        column = trace.columns.get(name)
        if column is None and derived:
            column = kind.derive(name, trace.prompt_tokens, trace.answer)
        if column is None:
            continue
        token_ms = column.token_ms(costs)
        if token_ms is not None:
            found.append(Source(column, token_ms))
    return found


def played_prices(trace: AnswerTrace, costs: MachineCosts) -> dict[str, float]:
    """A drafted token's time of each column the trace records and the costs price, by the
    drafter that drafts from it."""
    return {s.name: s.token_ms for s in sources(trace, costs, derived=False)}


@dataclass(frozen=True)
class Move:
    """One round the ceiling could make at a position of the answer.

    Attributes:
        source: the record it drafts from (PLAIN_SOURCE: no draft).
        k: tokens drafted (0 for plain).
        ms: its time: the pass holding k + 1 rows, and the draft model's (or the head's)
            k tokens.
        end: the position after it (what it kept, and the target's token).
        total: `ms` and the least time from `end` on.
    """

    source: str
    k: int
    ms: float
    end: int
    total: float


@dataclass(frozen=True)
class Oracle:
    """The ceiling, with the dynamic programme's decisions kept position by position.

    Attributes:
        ms: the ceiling: the least time to write the answer (ceiling_ms()).
        value: per position (and one past the last), the least time from there to the
            answer's end with the draft model kept in step for nothing: the ceiling less
            the catch-up it charges, and what each move's `total` is reckoned with, so that
            value[i] is exactly the best move's total at i.
        best: per position, each source's best move there (its lowest `total`), by source.
        sources: the sources it drafted from (see sources()).
    """

    ms: float
    value: tuple[float, ...]
    best: tuple[dict[str, Move], ...]
    sources: tuple[Source, ...] = ()

    @property
    def catchup_ms(self) -> float:
        """What keeping the draft model in step costs the ceiling: its one-off time."""
        return self.ms - self.value[0]

    def choice(self, i: int) -> Move:
        """What the ceiling does at position i: the best move of any source (the first
        source of equals, plain first)."""
        return min(self.best[i].values(), key=lambda move: move.total)


def ceiling_ms(trace: AnswerTrace, costs: MachineCosts) -> float:
    """The least time to write `trace.answer` with plain, copied (lookup, suffix index),
    draft-model and draft-head rounds (see oracle())."""
    return oracle(trace, costs).ms


def oracle(trace: AnswerTrace, costs: MachineCosts) -> Oracle:
    """The ceiling: the least time to write `trace.answer`, and each source's best round at
    every position.

    A dynamic programme over positions, knowing the answer: each round picks plain, a copy,
    a draft-model draft or a head's draft of any length at the cheapest pass holding it (a
    suffix tree is priced as its longest path, with what its best branch keeps); a head
    follows the target's cache, so it never catches up. While the draft model is in
    use, text written by other rounds must be caught up; charging every round's tokens
    beyond two at the catch-up rate is never more than a real catch-up costs, so no causal
    policy can beat this. Beside it runs the same programme with catch-up free (`value`):
    one value per position, so that a round's worth is its time plus the value where it
    ends, whatever came before (what the loss ledger compares auto's rounds with).
    """
    n = len(trace.answer)
    start = len(trace.prompt_tokens)
    found = sources(trace, costs)
    free = [src for src in found if not src.column.catches_up]
    stepped = [src for src in found if src.column.catches_up]
    assert len(stepped) <= 1, "the ceiling keeps one drafter in step, not several"
    catchup = costs.catchup_ms(3) / 3 if stepped else 0.0
    inf = float("inf")
    # never[i]: from position i on without a stepped drafter; using[i]: with it kept in step.
    never = [0.0] * (n + 1)
    using = [0.0 if stepped else inf] * (n + 1)
    value = [0.0] * (n + 1)  # from position i on, catch-up free
    best: list[dict[str, Move]] = [{} for _ in range(n)]
    answer = trace.answer
    for i in range(n - 1, -1, -1):
        room = n - i - 1
        depth = start + i  # passes cost more deeper in the text
        one = costs.target.target_ms(1, depth)
        assert one is not None
        moves = [(PLAIN_SOURCE, 0, one, i + 1)]
        for src in free:
            column, token_ms = src.column, src.token_ms
            kept = column.kept(i, answer)
            for k in range(1, min(column.reach(i), room, column.max_k) + 1):
                ms = costs.target.target_ms(k + 1, depth)
                assert ms is not None
                moves.append((src.name, k, ms + k * token_ms, i + min(k, kept) + 1))
        never[i] = min(ms + never[j] for _, _, ms, j in moves)
        for src in stepped:
            column, token_ms = src.column, src.token_ms
            best_using = min(ms + max(0, j - i - 2) * catchup + using[j] for _, _, ms, j in moves)
            kept = column.kept(i, answer)
            for k in range(1, min(column.reach(i), room, column.max_k) + 1):
                ms = costs.target.target_ms(k + 1, depth)
                assert ms is not None
                j = i + min(k, kept) + 1
                best_using = min(best_using, ms + k * token_ms + min(using[j], never[j]))
                moves.append((src.name, k, ms + k * token_ms, j))
            using[i] = best_using
        for source, k, ms, j in moves:
            _keep_best(best[i], Move(source, k, ms, j, ms + value[j]))
        value[i] = min(move.total for move in best[i].values())
    return Oracle(min(never[0], using[0]), tuple(value), tuple(best), tuple(found))


def _keep_best(best: dict[str, Move], move: Move) -> None:
    """Keep `move` as its source's best if it beats the one kept (the first of equals)."""
    kept = best.get(move.source)
    if kept is None or move.total < kept.total:
        best[move.source] = move


def best_fixed_ms(trace: AnswerTrace, costs: MachineCosts) -> tuple[float, str]:
    """The least time of one fixed setting for the whole answer, chosen knowing it: plain,
    or one drafter's column with K = 1 … its longest (lookup's 63, a model's or a head's
    16): what a person tuning the mode and K by hand for this very answer would reach.
    Returns (ms, "mode K")."""
    n = len(trace.answer)
    best = (plain_ms(trace, costs), "plain")
    options = [
        (src, k)
        for src in sources(trace, costs, derived=False)
        if src.column.fixed
        for k in range(1, src.column.max_k + 1)
    ]
    for src, k in options:
        column, i, spent = src.column, 0, 0.0
        while i < n and spent < best[0]:
            room = min(k, n - i - 1)
            drafted = min(room, column.reach(i))
            kept = min(drafted, column.kept(i, trace.answer))
            ms = costs.target.target_ms(drafted + 1, len(trace.prompt_tokens) + i)
            assert ms is not None
            spent += ms + drafted * src.token_ms
            i += kept + 1
        if i >= n and spent < best[0]:
            best = (spent, f"{src.name} K={k}")
    return best


def plain_ms(trace: AnswerTrace, costs: MachineCosts) -> float:
    """Plain decoding's time for the answer: one pass a token, each a token deeper."""
    start, total = len(trace.prompt_tokens), 0.0
    for i in range(len(trace.answer)):
        one = costs.target.target_ms(1, start + i)
        assert one is not None
        total += one
    return total
