"""The bench's own answers replayed on the pass costs it measured: auto, the ceiling and the
loss ledger, for report.json and report.md."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from specchat.bench.hindsight.ledger import KEYS, LABELS, Cause, Ledger, percent
from specchat.engine.costs.machine import MachineCosts
from specchat.engine.costs.table import CostTable

if TYPE_CHECKING:
    from specchat.bench.live.physical import PhysicalCosts
    from specchat.bench.live.runner import BenchOutcome


def measured_costs(physical: PhysicalCosts, *, gpu: bool) -> MachineCosts:
    """This run's measured passes (and draft token, and each head's) as a whole cost
    table: a size between two measured ones priced on the straight line between them (as
    the lookup ceiling prices it, bench/live/ceiling.py), so that no round of the replay teaches
    the table a size it lacked (which would reprice its neighbours mid-answer); catch-up at
    the draft model's estimated batched rate."""
    measured = sorted(physical.batch_ms)
    top = measured[-1]
    line = np.interp(range(1, top + 1), measured, [physical.batch_ms[n] for n in measured])
    target = CostTable(
        sizes=tuple(range(1, top + 1)), gpu=gpu, context_tokens=physical.context_tokens
    )
    costs = MachineCosts(target, name="measured in this run")
    costs.seed(
        {n: float(ms) for n, ms in enumerate(line, 1)},
        physical.draft_token_ms,
        physical.head_token_ms,
    )
    return costs


def replay_section(outcome: BenchOutcome) -> dict[str, Any] | None:
    """Auto and the ceiling on every recorded T = 0 answer at this run's measured costs,
    with the loss ledger per prompt and over them all (None: no traces, or no costs)."""
    from specchat.bench.hindsight.replay import replay

    if not outcome.traces or outcome.physical is None:
        return None
    gpu = str(outcome.info.get("backend", "CPU")) != "CPU"
    results = replay(list(outcome.traces.values()), measured_costs(outcome.physical, gpu=gpu))
    if not results:
        return None
    return {
        "costs": "measured in this run (physical)",
        "prompts": [r.to_json() for r in results],
        "ledger": Ledger.total([r.ledger for r in results]).to_json(),
    }


def render_replay(section: dict | None) -> list[str]:
    """report.md's replay section: per prompt, auto and the ceiling; then where auto's time
    over the ceiling's went, by cause."""
    if not section:
        return []
    prompts: Sequence[dict] = section["prompts"]
    lines = [
        "",
        "## Replayed at this run's measured costs: auto, the ceiling and the loss ledger",
        "",
        "Each plain T = 0 answer replayed with `auto` (the real policy and drafters) on the "
        "pass costs measured above, against the ceiling (every round chosen knowing the "
        "answer). The ledger splits auto's time over the ceiling's by cause "
        '(docs/costs.md, "Where auto\'s time goes").',
        "",
    ]
    lines += _rows(
        ["prompt", "auto", "best fixed", "ceiling", "share of ceiling"],
        [
            [
                p["prompt"],
                f"{p['auto_speedup']:.2f}×",
                f"{p['best_fixed_speedup']:.2f}× ({p['best_fixed']})",
                f"{p['ceiling_speedup']:.2f}×",
                f"{p['share_of_ceiling']:.0%}",
            ]
            for p in prompts
        ],
    )
    whole = section["ledger"]
    header = ["cause", *(p["prompt"] for p in prompts), "all (ms)", "all (share)"]
    rows = [
        [
            "gap: auto − ceiling (ms)",
            *(f"{p['ledger']['gap_ms']:.1f}" for p in prompts),
            f"{whole['gap_ms']:.1f}",
            "",
        ]
    ]
    for cause in Cause:
        key = KEYS[cause]
        rows.append(
            [
                LABELS[cause],
                *(percent(p["ledger"]["causes"][key]["share"]) for p in prompts),
                f"{whole['causes'][key]['ms']:.1f}",
                percent(whole["causes"][key]["share"]),
            ]
        )
    lines += ["", *_rows(header, rows)]
    if whole["readying_ms"]:
        lines += [
            "",
            f"Readying the draft model before the first token: {whole['readying_ms']:.1f} ms "
            "over these answers (before auto's timed rounds, so in no cause).",
        ]
    return lines


def _rows(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]
