"""The bench report's multi-turn part: per-turn speed-up, where kept drafts came from, prefix
reuse, and the session goals."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from specchat.bench.live.runner import geomean

#: Session goals, by the session's category: (which turns, the speed-up auto must reach).
#: A follow-up edit and a regenerate redo text already said; a file pasted again in a new
#: chat finds it in an earlier one.
SESSION_GOALS = {
    "session-edit": ("follow-up turns", 2.0),
    "session-regenerate": ("follow-up turns", 2.0),
    "session-new-chat": ("first turn", 1.5),
}


def session_rows(results: Sequence[dict]) -> list[dict]:
    """One row per (session, turn, mode, temperature): speed-ups over repeats, where kept
    draft tokens came from, and the prompt tokens the turn evaluated."""
    sessions = {
        r["prompt"] for r in results if r.get("turn", 0) > 0 or r["category"].startswith("session")
    }
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in results:
        if r["prompt"] in sessions:
            groups[(r["prompt"], r["turn"], r["mode"], r["k"], r["temperature"])].append(r)
    rows = []
    for (prompt, turn, mode, k, temperature), runs in sorted(groups.items(), key=_order):
        kept: dict[str, int] = defaultdict(int)
        for run in runs:
            for source, n in run.get("kept_by_source", {}).items():
                kept[source] += n
        speedups = [run["speedup"] for run in runs if run["speedup"]]
        in_run = [run["in_run_speedup"] for run in runs if run.get("in_run_speedup")]
        rows.append(
            {
                "prompt": prompt,
                "category": runs[0]["category"],
                "turn": turn,
                "mode": mode if k is None else f"{mode} K={k}",
                "temperature": temperature,
                "speedup": round(geomean(speedups), 4) if speedups else None,
                "in_run_speedup": round(geomean(in_run), 4) if in_run else None,
                "tok_s": round(sum(run["tok_s"] for run in runs) / len(runs), 3),
                "alpha": round(sum(run["alpha"] for run in runs) / len(runs), 4),
                "kept_by_source": dict(sorted(kept.items())),
                "prompt_tokens": runs[0].get("prompt_tokens"),
                "prompt_evaluated": runs[0].get("prompt_evaluated"),
            }
        )
    return rows


def _order(item: tuple[tuple, list[dict]]) -> tuple:
    prompt, turn, mode, k, temperature = item[0]
    return (prompt, temperature, turn, mode != "plain", mode, k or 0)


def session_goals(
    rows: Sequence[dict], ceilings: Mapping[str, float] | None = None
) -> list[tuple[str, bool | None, str]]:
    """(name, passed, detail) per session goal, from auto's T = 0 rows; `ceilings`: the
    lookup ceiling per turn ("id" for a first turn, "id#1" for a later one), where known."""
    ceilings = ceilings or {}
    goals = []
    for category, (which, goal) in SESSION_GOALS.items():
        picked = [
            r
            for r in rows
            if r["category"] == category
            and r["mode"] == "auto"
            and r["temperature"] == 0
            and (r["turn"] > 0) == (which == "follow-up turns")
        ]
        measured = [r for r in picked if r["speedup"]]
        detail = ", ".join(_turn_detail(r, ceilings) for r in measured)
        goals.append(
            (
                f"auto ≥ {goal}× plain on {category} sessions' {which}, T = 0",
                all(r["speedup"] >= goal for r in measured) if measured else None,
                detail or "no such sessions",
            )
        )
    return goals


def _turn_detail(row: Mapping[str, Any], ceilings: Mapping[str, float]) -> str:
    name = f"{row['prompt']}#{row['turn']}"
    ceiling = ceilings.get(name if row["turn"] else row["prompt"])
    limit = f" (lookup ceiling {ceiling:.2f}×)" if ceiling is not None else ""
    return f"{name} {row['speedup']:.3f}×{limit}"


def render_sessions(rows: Sequence[dict]) -> list[str]:
    """The report.md section (empty without sessions)."""
    if not rows:
        return []
    lines = [
        "",
        "## Sessions (multi-turn)",
        "",
        "Each turn follows plain's answers to the turns before it, in every mode. `prompt eval.`: "
        "prompt tokens the turn evaluated with the turn before still cached (of all its "
        "prompt tokens). `kept from`: draft tokens kept, by where they were found.",
        "",
        "| session | turn | T | mode | speed-up | in-run | tok/s | α | kept from | prompt eval. |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        kept = ", ".join(f"{source} {n}" for source, n in r["kept_by_source"].items()) or "–"
        lines.append(
            f"| {r['prompt']} | {r['turn']} | {r['temperature']:g} | {r['mode']} | "
            f"{_ratio(r['speedup'])} | {_ratio(r['in_run_speedup'])} | {r['tok_s']:.1f} | "
            f"{r['alpha']:.2f} | {kept} | {r['prompt_evaluated']} / {r['prompt_tokens']} |"
        )
    return lines


def _ratio(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×"
