"""Compares every run with plain's: speed-up, time to first token, identity at T = 0."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from specchat.bench.live.records import RunRecord, kept_by_source
from specchat.bench.live.runner import BenchOutcome
from specchat.engine.drafting.registry import PLAIN

#: A divergence from plain at temperature 0 where plain's top-1 − top-2 logit was below this
#: is float noise between batch sizes, not a verification bug.
NEAR_TIE_MARGIN = 0.1


def divergence(plain: Sequence[int], other: Sequence[int]) -> int | None:
    """First position where the two token streams differ (None when identical)."""
    for i, (a, b) in enumerate(zip(plain, other, strict=False)):
        if a != b:
            return i
    if len(plain) != len(other):
        return min(len(plain), len(other))
    return None


def in_run_speedup(record: RunRecord) -> float | None:
    """Speed-up of a run over its own plain rounds: immune to drift between runs.

    Prices every round's tokens at the mean wall time of the run's plain rounds and divides
    by the time the rounds really took. Plain rounds cancel out, so the figure is what the
    drafted rounds saved or lost; exactly 1 for a run that never drafted, and None for one
    with no plain round to price against. Side-by-side runs a few seconds apart differ by
    ±10 % on a busy laptop; this figure does not see that.
    """
    plain = [log.wall_ms for log in record.round_logs if log.drafted == 0]
    if not plain:
        return None
    per_token = sum(plain) / len(plain)
    spent = sum(log.wall_ms for log in record.round_logs)
    produced = sum(log.accepted + 1 for log in record.round_logs)
    return per_token * produced / spent if spent > 0 else None


def choice_counts(record: RunRecord) -> dict[str, int]:
    """Rounds per drafter actually used (what auto chose)."""
    return dict(Counter(log.mode for log in record.round_logs))


def compare(outcome: BenchOutcome) -> list[dict[str, object]]:
    """One result object per run, with speed-up and T = 0 identity against plain's run."""
    plain = {
        (r.prompt, r.turn, r.temperature, r.repeat): r
        for r in outcome.records
        if r.variant.mode == PLAIN
    }
    noise = outcome.physical.max_logit_noise if outcome.physical else None
    results = []
    for r in outcome.records:
        base = plain.get((r.prompt, r.turn, r.temperature, r.repeat))
        speedup = None
        if base is not None and base.tok_s > 0:
            # Plain's own row is 1.0 exactly, not a ratio of two equal floats.
            speedup = 1.0 if base is r else r.tok_s / base.tok_s
        ttft_ratio = None
        if base is not None and base.ttft_ms > 0:
            ttft_ratio = 1.0 if base is r else r.ttft_ms / base.ttft_ms
        overhead_ms = r.elapsed_s * 1000.0 - r.draft_ms - r.verify_ms
        row: dict[str, object] = {
            "prompt": r.prompt,
            "turn": r.turn,
            "category": r.category,
            "mode": r.variant.mode,
            "k": r.variant.k,
            "temperature": r.temperature,
            "repeat": r.repeat,
            "tokens": len(r.tokens),
            "tok_s": round(r.tok_s, 3),
            "elapsed_s": round(r.elapsed_s, 4),
            "speedup": None if speedup is None else round(speedup, 4),
            "in_run_speedup": None if (v := in_run_speedup(r)) is None else round(v, 4),
            "alpha": round(r.accepted / r.drafted, 4) if r.drafted else 0.0,
            "tau": round(len(r.tokens) / r.rounds, 4) if r.rounds else 0.0,
            "rounds": r.rounds,
            "drafted": r.drafted,
            "accepted": r.accepted,
            "draft_ms": round(r.draft_ms, 2),
            "verify_ms": round(r.verify_ms, 2),
            "overhead_ms": round(overhead_ms, 2),
            "prompt_ms": round(r.prompt_ms, 2),
            "ttft_ms": round(r.ttft_ms, 2),
            "ttft_over_plain": None if ttft_ratio is None else round(ttft_ratio, 4),
            "total_ms": round(r.total_ms, 2),
            "prompt_tokens": r.prompt_tokens,
            "prompt_evaluated": r.prompt_evaluated,
            "position_drafted": list(r.position_drafted),
            "position_accepted": list(r.position_accepted),
            "choices": choice_counts(r),
            "kept_by_source": kept_by_source(r),
            "stop": r.stop,
            "text": r.text,
        }
        if r.temperature == 0 and base is not None:
            pos = divergence(base.tokens, r.tokens)
            row["identical_to_plain"] = pos is None
            row["divergence"] = pos
            margin = base.margins[pos] if pos is not None and pos < len(base.margins) else None
            row["divergence_margin"] = None if margin is None else round(margin, 4)
            row["divergence_near_tie"] = (
                None if pos is None else (margin is not None and margin < NEAR_TIE_MARGIN)
            )
            # A flip needs the top two logits to move apart by more than the margin, and
            # each moves by at most the measured batch noise.
            row["divergence_within_noise"] = (
                None
                if pos is None or noise is None
                else (margin is not None and margin < 2 * noise)
            )
        results.append(row)
    return results


def floor_rows(outcome: BenchOutcome) -> list[dict[str, object]]:
    """Per prompt: llama.cpp's loop against plain mode at temperature 0."""
    plain = {
        (r.prompt, r.repeat): r
        for r in outcome.records
        if r.variant.mode == PLAIN and r.temperature == 0 and r.turn == 0
    }
    rows = []
    for (prompt, repeat), run in outcome.floors.items():
        base = plain.get((prompt, repeat))
        rows.append(
            {
                "prompt": prompt,
                "repeat": repeat,
                "tokens": len(run.tokens),
                "tok_s": round(run.tokens_per_s, 3),
                "plain_tok_s": None if base is None else round(base.tok_s, 3),
                "plain_over_floor": (
                    None
                    if base is None or run.tokens_per_s <= 0
                    else round(base.tok_s / run.tokens_per_s, 4)
                ),
                "identical_to_plain": None if base is None else tuple(base.tokens) == run.tokens,
            }
        )
    return rows


def round_table(outcome: BenchOutcome) -> list[dict[str, object]]:
    """Per-round logs flattened, for rounds.jsonl (verify cost by batch, auto's choices),
    then one trace per prompt (every drafter's proposals, for `bench --replay`)."""
    rows: list[dict[str, object]] = []
    for r in outcome.records:
        for i, log in enumerate(r.round_logs):
            rows.append(
                {
                    "record": "round",
                    "prompt": r.prompt,
                    "run": r.variant.label,
                    "temperature": r.temperature,
                    "repeat": r.repeat,
                    "round": i,
                    "mode": log.mode,
                    "k": log.k,
                    "drafted": log.drafted,
                    "accepted": log.accepted,
                    "draft_ms": round(log.draft_ms, 3),
                    "verify_ms": round(log.verify_ms, 3),
                    "wall_ms": round(log.wall_ms, 3),
                    "reason": log.reason,
                }
            )
    rows.extend(trace.to_json() for trace in outcome.traces.values())
    return rows
