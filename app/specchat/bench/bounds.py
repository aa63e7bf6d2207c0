"""What any policy could reach on a recorded answer, knowing it: the ceiling over every
recorded source (prompt lookup, the suffix index, the draft model, each draft head) and the
best fixed setting."""

from __future__ import annotations

from dataclasses import dataclass

from specchat.bench.trace import DRAFT_DEPTH, AnswerTrace, agreement
from specchat.engine.costs.table import MachineCosts

#: Longest draft of prompt lookup (a pass of 64) and of the draft model.
LOOKUP_K = 63
DRAFT_K = DRAFT_DEPTH


def _draft_ms(costs: MachineCosts) -> float | None:
    return costs.draft_token_ms


def head_prices(trace: AnswerTrace, costs: MachineCosts) -> dict[str, float]:
    """A drafted token's time of each head the trace recorded and the costs price, by the
    drafter that drafts with it: the heads a replay drafts with."""
    prices = {name: costs.head_token_ms(name) for name in trace.heads}
    return {name: ms for name, ms in prices.items() if ms is not None}


def suffix_proposals(trace: AnswerTrace) -> list[tuple[int, int]]:
    """Per answer position, the suffix drafter's (proposal length, tokens kept) over this
    chat: its main path's length, and what its best branch — or the copy carried through the
    answer's substitutions — keeps (the ceiling's optimism)."""
    from specchat.engine.drafting.matching import locate
    from specchat.engine.drafting.substitutions import Substitutions
    from specchat.engine.drafting.suffix import MIN_SHARE, TREE_BRANCHES
    from specchat.engine.suffix.index import SuffixIndex

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


#: The ceiling's sources, named by the record each reads (plain reads none); a draft head's
#: is its drafter's name ("mtp").
PLAIN_SOURCE = "plain"
LOOKUP_SOURCE = "lookup"
SUFFIX_SOURCE = "suffix"
MODEL_SOURCE = "draft"


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
    """

    ms: float
    value: tuple[float, ...]
    best: tuple[dict[str, Move], ...]

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
    suffix = suffix_proposals(trace)
    start = len(trace.prompt_tokens)
    draft_token = _draft_ms(costs) if trace.draft is not None else None
    catchup = costs.catchup_ms(3) / 3 if draft_token is not None else 0.0
    heads = head_prices(trace, costs)
    inf = float("inf")
    # never[i]: from position i on without the draft model; using[i]: with it kept in step.
    never = [0.0] * (n + 1)
    using = [0.0 if draft_token is not None else inf] * (n + 1)
    value = [0.0] * (n + 1)  # from position i on, catch-up free
    best: list[dict[str, Move]] = [{} for _ in range(n)]
    for i in range(n - 1, -1, -1):
        room = n - i - 1
        depth = start + i  # passes cost more deeper in the text
        one = costs.target.target_ms(1, depth)
        assert one is not None
        moves = [(PLAIN_SOURCE, 0, one, i + 1)]
        copies = (
            (LOOKUP_SOURCE, trace.lookup_len[i], trace.lookup_kept(i)),
            (SUFFIX_SOURCE, *suffix[i]),
        )
        for source, length, kept in copies:
            for k in range(1, min(length, room, LOOKUP_K) + 1):
                ms = costs.target.target_ms(k + 1, depth)
                assert ms is not None
                moves.append((source, k, ms, i + min(k, kept) + 1))
        for name, token_ms in heads.items():
            kept = trace.head_kept(name, i)
            for k in range(1, min(DRAFT_K, room) + 1):
                ms = costs.target.target_ms(k + 1, depth)
                assert ms is not None
                moves.append((name, k, ms + k * token_ms, i + min(k, kept) + 1))
        never[i] = min(ms + never[j] for _, _, ms, j in moves)
        if draft_token is not None:
            best_using = min(ms + max(0, j - i - 2) * catchup + using[j] for _, _, ms, j in moves)
            kept = trace.draft_kept(i)
            for k in range(1, min(DRAFT_K, room) + 1):
                ms = costs.target.target_ms(k + 1, depth)
                assert ms is not None
                j = i + min(k, kept) + 1
                best_using = min(best_using, ms + k * draft_token + min(using[j], never[j]))
                moves.append((MODEL_SOURCE, k, ms + k * draft_token, j))
            using[i] = best_using
        for source, k, ms, j in moves:
            _keep_best(best[i], Move(source, k, ms, j, ms + value[j]))
        value[i] = min(move.total for move in best[i].values())
    return Oracle(min(never[0], using[0]), tuple(value), tuple(best))


def _keep_best(best: dict[str, Move], move: Move) -> None:
    """Keep `move` as its source's best if it beats the one kept (the first of equals)."""
    kept = best.get(move.source)
    if kept is None or move.total < kept.total:
        best[move.source] = move


def best_fixed_ms(trace: AnswerTrace, costs: MachineCosts) -> tuple[float, str]:
    """The least time of one fixed setting for the whole answer, chosen knowing it:
    plain, lookup with K = 1 … 63, the draft model or a head with K = 1 … 16 (what a person
    tuning the mode and K by hand for this very answer would reach). Returns (ms, "mode K")."""
    n = len(trace.answer)
    best = (plain_ms(trace, costs), "plain")
    options = [("lookup", k) for k in range(1, LOOKUP_K + 1)]
    if trace.draft is not None and costs.draft_token_ms is not None:
        options += [("draft", k) for k in range(1, DRAFT_K + 1)]
    heads = head_prices(trace, costs)
    options += [(name, k) for name in heads for k in range(1, DRAFT_K + 1)]
    for mode, k in options:
        i, spent = 0, 0.0
        while i < n and spent < best[0]:
            room = min(k, n - i - 1)
            if mode == "lookup":
                drafted = min(room, trace.lookup_len[i])
                kept = min(drafted, trace.lookup_kept(i))
                extra = 0.0
            elif mode in heads:
                drafted = room
                kept = min(drafted, trace.head_kept(mode, i))
                extra = drafted * heads[mode]
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
