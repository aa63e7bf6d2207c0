"""Step: the recorded traces re-priced under each measured table and the shipped GPU one."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from gpu_check import child
from gpu_check.pairs import PAIRS

SETS = ("shipped", "everyday", "held-out")
#: Sizes of each table's shape the report sets side by side.
SHAPE_SIZES = (2, 4, 8, 16, 32, 64)
#: Traces per set with --small: enough to run every part of the replay.
SMALL_TRACES = 2


def tables(out: Path) -> dict[str, Any]:
    """The cost files to replay under, by name: the measured ones, then the shipped one."""
    from specchat.bench.hindsight.replay import read_costs

    found: dict[str, Any] = {}
    for pair in PAIRS:
        path = out / f"costs-{pair.name}.json"
        if pair.replay and path.exists():
            costs = read_costs(str(path))
            if costs.draft_token_ms is not None:
                found[pair.name] = costs
    found["shipped-gpu"] = read_costs("gpu")
    return found


def summary(results: list[Any]) -> dict[str, Any]:
    from specchat.bench.live.runner import geomean

    return {
        "answers": len(results),
        "auto_speedup": round(geomean([r.speedup for r in results]), 4),
        "best_fixed_speedup": round(geomean([r.best_fixed for r in results]), 4),
        "ceiling_speedup": round(geomean([r.ceiling for r in results]), 4),
        "share_of_ceiling": round(geomean([r.share_of_ceiling for r in results]), 4),
        "lost_to_plain": sum(1 for r in results if r.speedup < 0.999),
        "main_drafters": sorted({r.main_drafter for r in results}),
    }


def run(args: argparse.Namespace, deadline: child.Deadline) -> dict[str, Any]:
    import specchat.bench
    from specchat.bench.hindsight.replay import read_traces, replay

    folder = Path(specchat.bench.__file__).parent / "traces"
    traces = {name: read_traces(folder / f"{name}.jsonl") for name in SETS}
    if args.small:
        traces = {name: found[:SMALL_TRACES] for name, found in traces.items()}
    out: dict[str, Any] = {"tables": {}}
    for table, costs in tables(args.out).items():
        one = costs.target_ms(1)
        rows: dict[str, Any] = {
            "name": costs.name,
            "target_ms": round(one, 3) if one else None,
            "draft_ratio": round(costs.draft_token_ms / one, 3)
            if one and costs.draft_token_ms
            else None,
            "shape": {
                str(n): round((costs.cost_ms(n) or 0.0) / one, 3)
                for n in SHAPE_SIZES
                if one and n <= costs.target.sizes[-1]
            },
        }
        for name, found in traces.items():
            if deadline.passed(margin=5.0):
                rows[name] = {"skipped": "time budget"}
                continue
            rows[name] = summary(replay(found, costs))
        out["tables"][table] = rows
    return out


if __name__ == "__main__":
    child.main(__doc__ or "", run)
