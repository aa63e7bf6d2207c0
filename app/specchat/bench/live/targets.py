"""Several targets in one bench run: plain and auto on each, with ratios between the targets."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from specchat.bench.live.quality import NOISE_CONTEXT
from specchat.bench.live.runner import geomean

#: Batch sizes whose pass cost (× one token) the comparison shows.
COST_SIZES = ("2", "4", "8", "16")


def _key(row: dict) -> tuple:
    return (row["prompt"], row.get("turn", 0), row["repeat"])


def _by_mode(report: dict, mode: str, temperature: float) -> dict[tuple, dict]:
    return {
        _key(row): row
        for row in report["results"]
        if row["mode"] == mode and row["temperature"] == temperature
    }


def _ratio(top: dict[tuple, dict], bottom: dict[tuple, dict]) -> float | None:
    paired = [
        top[key]["tok_s"] / bottom[key]["tok_s"]
        for key in top
        if key in bottom and bottom[key]["tok_s"] > 0 and top[key]["tok_s"] > 0
    ]
    return round(geomean(paired), 4) if paired else None


def compare_targets(reports: Sequence[tuple[str, dict]]) -> dict:
    """Per target and temperature: plain and auto speed, auto ÷ plain, and each ÷ the first
    target's plain, paired prompt by prompt; plus each target's pass costs and batch noise.
    """
    if not reports:
        raise ValueError("no targets to compare")
    first_label, first = reports[0]
    temperatures = first["config"]["temperatures"]
    rows = []
    for label, report in reports:
        physical = report.get("physical") or {}
        relative = physical.get("batch_relative", {})
        noise = physical.get("logit_noise", {})
        for temperature in temperatures:
            plain = _by_mode(report, "plain", temperature)
            auto = _by_mode(report, "auto", temperature)
            base = _by_mode(first, "plain", temperature)
            in_run = [r["in_run_speedup"] for r in auto.values() if r.get("in_run_speedup")]
            identical = [
                r["identical_to_plain"] for r in auto.values() if "identical_to_plain" in r
            ]
            rows.append(
                {
                    "target": label,
                    "file": report["info"].get("target_file"),
                    "description": report["info"].get("target"),
                    "temperature": temperature,
                    "plain_tok_s": round(geomean([r["tok_s"] for r in plain.values()]), 3),
                    "auto_tok_s": round(geomean([r["tok_s"] for r in auto.values()]), 3)
                    if auto
                    else None,
                    "auto_over_plain": _ratio(auto, plain),
                    "auto_in_run": round(geomean(in_run), 4) if in_run else None,
                    "plain_over_first_plain": _ratio(plain, base),
                    "auto_over_first_plain": _ratio(auto, base),
                    "identical_at_t0": (
                        f"{sum(identical)}/{len(identical)}" if temperature == 0 else None
                    ),
                    "pass_cost": {n: relative.get(n) for n in COST_SIZES if n in relative},
                    "batch_noise": max(noise.values(), default=None),
                }
            )
    return {"first": first_label, "targets": [label for label, _ in reports], "rows": rows}


def _cell(value: object, suffix: str = "") -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.2f}{suffix}"
    return f"{value}{suffix}"


def render_comparison(comparison: dict) -> str:
    """The side-by-side table in Markdown."""
    first = comparison["first"]
    lines = [
        "# Targets side by side",
        "",
        "Each target ran the same prompts in this one run, one target after the other; plain "
        "and auto alternate within each target's runs. Ratios pair prompt by prompt "
        f"(geometric means); `÷ {first} plain` compares against the first target's plain runs.",
        "",
        f"| target | file | T | plain tok/s | auto tok/s | auto ÷ plain | auto in-run "
        f"| plain ÷ {first} plain | auto ÷ {first} plain | T = 0 identical "
        f"| pass of 2 / 4 / 8 / 16 (× 1) | batch noise |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in comparison["rows"]:
        costs = " / ".join(_cell(v) for v in row["pass_cost"].values()) or "–"
        noise = row["batch_noise"]
        lines.append(
            f"| {row['target']} | {row['file']} | {row['temperature']:g} "
            f"| {_cell(row['plain_tok_s'])} | {_cell(row['auto_tok_s'])} "
            f"| {_cell(row['auto_over_plain'], '×')} | {_cell(row['auto_in_run'], '×')} "
            f"| {_cell(row['plain_over_first_plain'], '×')} "
            f"| {_cell(row['auto_over_first_plain'], '×')} | {_cell(row['identical_at_t0'])} "
            f"| {costs} | {'–' if noise is None else f'{noise:.3g}'} |"
        )
    lines += [
        "",
        "Batch noise: the largest |logit| difference between a batched row and the same "
        f"position decoded alone, after {NOISE_CONTEXT} cached tokens (0 = bit-identical; "
        "see docs/formats.md).",
        "",
    ]
    return "\n".join(lines)


def write_comparison(reports: Sequence[tuple[str, dict]], out_dir: Path) -> dict:
    """targets.json and targets.md in `out_dir`; returns the comparison."""
    comparison = compare_targets(reports)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "targets.json").write_text(
        json.dumps(comparison, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    (out_dir / "targets.md").write_text(render_comparison(comparison), encoding="utf-8")
    return comparison


def summary_lines(comparison: dict) -> list[str]:
    """One line per target and temperature for the terminal."""
    first = comparison["first"]
    out = []
    grouped: dict[str, list[dict]] = defaultdict(list)
    for row in comparison["rows"]:
        grouped[row["target"]].append(row)
    for label, rows in grouped.items():
        for row in rows:
            out.append(
                f"{label:<20} T={row['temperature']:<4g} plain {_cell(row['plain_tok_s'])} tok/s"
                f", auto {_cell(row['auto_tok_s'])} tok/s ({_cell(row['auto_over_plain'], '×')} "
                f"plain, {_cell(row['auto_over_first_plain'], '×')} {first}'s plain)"
            )
    return out
