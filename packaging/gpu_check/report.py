"""The check's report: every step with its time and result as JSON, and the same in Markdown."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpu_check.steps import StepResult

#: Sizes the Markdown shows of each target's shape (every measured size is in the JSON).
SHOWN = (2, 4, 8, 16, 32, 64)


def write(out: Path, machine: dict[str, Any], steps: Sequence[StepResult]) -> None:
    """report.json and report.md into `out` (rewritten after every step: a run stopped
    from outside still leaves what it had)."""
    out.mkdir(parents=True, exist_ok=True)
    data = {"machine": machine, "steps": [step.to_json() for step in steps]}
    (out / "report.json").write_text(json.dumps(data, indent=1), encoding="utf-8")
    (out / "report.md").write_text("\n".join(markdown(machine, steps)) + "\n", encoding="utf-8")


def markdown(machine: dict[str, Any], steps: Sequence[StepResult]) -> list[str]:
    lines = ["# SpecChat GPU check", ""]
    lines += [f"- {key}: {value}" for key, value in machine.items()]
    total = sum(step.seconds for step in steps)
    lines += ["", f"## Steps ({total:.0f} s in all)", "", "| step | status | seconds | note |"]
    lines.append("|---|---|---:|---|")
    for step in steps:
        note = step.error.replace("|", "/").replace("\n", " ")[:160]
        lines.append(f"| {step.name} | {step.status} | {step.seconds:.1f} | {note} |")
    by_name = {step.name: step for step in steps}
    lines += _costs(steps, by_name.get("replay"))
    lines += _noise(steps)
    lines += _exactness(by_name.get("exactness"))
    lines += _replay(by_name.get("replay"))
    failed = [step for step in steps if step.status == "failed" and step.log_tail]
    if failed:
        lines += ["", "## Failures", ""]
        for step in failed:
            lines += [f"### {step.name}", "", "```", step.log_tail[-1500:].strip(), "```", ""]
    return lines


def _costs(steps: Sequence[StepResult], replay: StepResult | None) -> list[str]:
    measured = [s for s in steps if s.name.startswith("costs:") and s.data.get("shape")]
    if not measured:
        return []
    lines = ["", "## Pass costs (fully offloaded)", ""]
    lines.append(
        "| pair | backend | 1 row ms | "
        + " | ".join(f"×{n}" for n in SHOWN)
        + " | draft token | heads | depth slope | checkpoint |"
    )
    lines.append("|---|---|---:|" + "---:|" * len(SHOWN) + "---:|---|---:|---:|")
    for step in measured:
        d = step.data
        one = d["target_ms"]
        shape = " | ".join(
            f"{d['shape'][str(n)]:.2f}" if str(n) in d["shape"] else "—" for n in SHOWN
        )
        draft = f"{d['draft_ms'] / one:.2f}×" if d.get("draft_ms") else "—"
        heads = ", ".join(f"{name} {ms / one:.2f}×" for name, ms in d.get("heads_ms", {}).items())
        slope = f"{d['slope_ms']:.3f}" if d.get("slope_ms") is not None else "—"
        checkpoint = f"{d['checkpoint_ms']:.3f}" if d.get("checkpoint_ms") is not None else "—"
        lines.append(
            f"| {step.name.split(':', 1)[1]} | {d.get('backend')} | {one:.2f} | {shape} | "
            f"{draft} | {heads or '—'} | {slope} | {checkpoint} |"
        )
    lines += [
        "",
        "Each size × a one-row pass; draft and head tokens × a target token; depth slope: ms "
        "more per row per 1,000 cached tokens; checkpoint: a hybrid's state saved and restored "
        "(ms).",
    ]
    shipped = _shipped_shape(replay)
    if shipped:
        lines += ["", f"Shipped GPU table (resources/costs, RTX 3090 figures): {shipped}"]
    return lines


def _shipped_shape(replay: StepResult | None) -> str:
    if replay is None:
        return ""
    table = replay.data.get("tables", {}).get("shipped-gpu", {})
    shape = table.get("shape", {})
    text = ", ".join(f"×{n} {shape[str(n)]:.2f}" for n in SHOWN if str(n) in shape)
    if text and table.get("draft_ratio"):
        text += f"; draft token {table['draft_ratio']:.2f}×"
    return text


def _noise(steps: Sequence[StepResult]) -> list[str]:
    found = [s for s in steps if s.name.startswith("noise:") and s.data]
    if not found:
        return []
    lines = ["", "## Batch noise (largest |logit gap|, n rows against one at a time)", ""]
    lines += ["| model | noise by rows | logit std | median top-2 margin |", "|---|---|---:|---:|"]
    for step in found:
        for role in ("target", "draft"):
            d = step.data.get(role)
            if d:
                noise = ", ".join(f"{n}: {gap:.3g}" for n, gap in d["noise"].items())
                lines.append(
                    f"| {d['file']} | {noise} | {d['logit_std']} | {d['median_top2_margin']} |"
                )
    return lines


def _exactness(step: StepResult | None) -> list[str]:
    if step is None or not step.data:
        return []
    d = step.data
    lines = ["", "## Exactness at T = 0 (speculative against plain)", ""]
    lines.append(
        f"{d.get('identical')} of {d.get('cases')} answers identical; "
        f"{d.get('near_ties', 0)} parted at a near tie."
    )
    for key in ("tiny_pair", "tiny_hybrid"):
        if key in d:
            noise = ", ".join(f"{n}: {g}" for n, g in d[key]["noise"].items())
            lines.append(
                f"- {key}: batch noise by rows {noise}; a parting is a near tie below a margin "
                f"of {d[key]['near_tie']:.3g}"
            )
    lines += ["", "| model | mode | K | tokens | drafted | kept | identical |"]
    lines.append("|---|---|---:|---:|---:|---:|---|")
    for key in ("tiny_pair", "tiny_hybrid"):
        for case in d.get(key, {}).get("cases", []):
            same = "yes" if case["identical"] else _parting(case)
            lines.append(
                f"| {key} | {case['mode']} | {case['k']} | {case['tokens']} | "
                f"{case['drafted']} | {case['accepted']} | {same} |"
            )
    return lines


def _parting(case: dict[str, Any]) -> str:
    at = f"no (token {case.get('diverged_at')}"
    if "plain_margin" not in case:
        return at + ")"
    tie = ", a near tie" if case.get("near_tie") else ""
    return f"{at}, margin {case['plain_margin']}{tie})"


def _replay(step: StepResult | None) -> list[str]:
    if step is None or not step.data.get("tables"):
        return []
    lines = ["", "## Replay: recorded answers re-priced (geometric means over the set)", ""]
    lines += ["| table | set | answers | auto | best fixed | ceiling | lost to plain |"]
    lines.append("|---|---|---:|---:|---:|---:|---:|")
    for table, rows in step.data["tables"].items():
        for name, r in rows.items():
            if not isinstance(r, dict) or "answers" not in r:
                continue
            lines.append(
                f"| {table} | {name} | {r['answers']} | {r['auto_speedup']:.2f}× | "
                f"{r['best_fixed_speedup']:.2f}× | {r['ceiling_speedup']:.2f}× | "
                f"{r['lost_to_plain']} |"
            )
    return lines
