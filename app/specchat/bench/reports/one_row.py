"""Whether the physical curve's one-row pass is the pass the engine's plain rounds paid.

The ceilings and the replay price every round with the curve (bench/live/physical.py); measured
once on a noisy machine, its one-row figure has come out 45 % above what the same run's
plain rounds took (96 ms against 66 ms), inflating every ceiling. The check sets it beside
the median target pass of the run's rounds that drafted nothing, and flags a gap over
AGREEMENT."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from specchat.bench.live.records import RunRecord

#: Largest relative gap between the curve's one-row pass and the rounds' before it is flagged.
AGREEMENT = 0.10


def plain_round_ms(records: Sequence[RunRecord]) -> list[float]:
    """The target pass of every round that checked no draft (plain's rounds, and auto's
    rounds where it drafted nothing): one row, as the curve's n = 1."""
    return [
        log.verify_ms
        for r in records
        for log in r.round_logs
        if log.drafted == 0 and log.verify_ms > 0
    ]


def one_row_check(curve_ms: float, records: Sequence[RunRecord]) -> dict[str, Any] | None:
    """The curve's one-row ms against the rounds' median; None without such rounds."""
    rounds = plain_round_ms(records)
    if not rounds or curve_ms <= 0:
        return None
    engine_ms = statistics.median(rounds)
    ratio = curve_ms / engine_ms
    return {
        "curve_ms": round(curve_ms, 3),
        "engine_ms": round(engine_ms, 3),
        "rounds": len(rounds),
        "ratio": round(ratio, 4),
        "agrees": abs(ratio - 1.0) <= AGREEMENT,
    }


def goal(check: dict[str, Any] | None) -> tuple[str, bool | None, str]:
    """(name, passed, detail) for the report's goals."""
    name = f"one-row pass of the cost curve within {AGREEMENT:.0%} of the run's plain rounds"
    if check is None:
        return name, None, "no curve or no round without a draft"
    detail = (
        f"curve {check['curve_ms']:.2f} ms, rounds' median {check['engine_ms']:.2f} ms "
        f"({check['rounds']} rounds): {check['ratio']:.3f}×"
    )
    if not check["agrees"]:
        detail += "; the ceilings and replays priced with this curve are off by as much"
    return name, check["agrees"], detail
