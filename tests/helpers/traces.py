"""Answer traces and cost tables built by hand, for replays whose outcome is known."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from specchat.bench.live.trace import DRAFT_DEPTH, AnswerTrace
from specchat.engine.costs.machine import MachineCosts
from specchat.engine.costs.table import CostTable
from specchat.engine.types import RoundResult

#: A token no answer holds: where the draft model's choice misses.
MISS = 10**6
#: A prompt the tiny targets' answers copy from: lookup and the suffix index find runs.
COPIED_CODE_PROMPT = "def area(w, h):\n    return w * h\n\n" * 6 + "def area(w, h):\n"


def round_choices(rounds: Sequence[RoundResult]) -> list[tuple[str, int, int, int, int]]:
    """What a replay must give back of each live round: the choice, its pass and its outcome."""
    return [(r.choice.mode, r.choice.k, r.rows, r.drafted, r.accepted) for r in rounds]


def linear_costs(
    one_ms: float, row_ms: float, draft_token_ms: float | None = None, *, catchup_ms: float = 0.0
) -> MachineCosts:
    """A machine whose pass of n rows costs one_ms + row_ms × (n − 1), every size as seen in
    real rounds, with a draft model's token at `draft_token_ms` (None: no draft model) and
    `catchup_ms` a token of catch-up."""
    sizes = tuple(range(1, 65))
    target = CostTable(sizes=sizes, pass_ms={n: one_ms + row_ms * (n - 1) for n in sizes})
    target.seen = dict.fromkeys(sizes, 1)
    draft = None
    if draft_token_ms is not None:
        draft = CostTable(sizes=(1,), pass_ms={1: draft_token_ms})
    return MachineCosts(target, draft, catchup_token_ms=catchup_ms if draft else None)


def with_model(
    trace: AnswerTrace, agrees: Sequence[bool], *, margin: float | None = None
) -> AnswerTrace:
    """`trace` with a draft model whose greedy choice at position i is the answer's token
    where agrees[i] (and a token no answer holds elsewhere), always fully confident; and the
    target's margin at every token `margin` (None: as recorded, or read as sure)."""
    n = len(trace.answer)
    drafts = []
    for i in range(n):
        proposal = []
        for j in range(i, min(n, i + DRAFT_DEPTH)):
            proposal.append(trace.answer[j] if agrees[j] else MISS)
            if not agrees[j]:
                break  # as verification reads it: up to the first miss
        drafts.append(tuple(proposal))
    margins = trace.margins if margin is None else (margin,) * n
    return replace(trace, draft=tuple(drafts), draft_confidence=(1.0,) * n, margins=margins)
