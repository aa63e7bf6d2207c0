"""The bench report's time to first token: per mode against plain, and the first answer after a
load."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence

from specchat.bench.live.runner import geomean


def _label(row: dict) -> str:
    return row["mode"] if row["k"] is None else f"{row['mode']} K={row['k']}"


def ttft_rows(results: Sequence[dict]) -> list[dict]:
    """Per mode and temperature: the median time to first token over its runs, and its ratio
    to plain's (each run against plain's on the same prompt, turn and repeat; geometric mean)."""
    groups: dict[tuple[str, float], list[dict]] = defaultdict(list)
    for row in results:
        groups[(_label(row), row["temperature"])].append(row)
    rows = []
    for (label, temperature), runs in groups.items():
        ratios = [r["ttft_over_plain"] for r in runs if r.get("ttft_over_plain")]
        rows.append(
            {
                "mode": label,
                "temperature": temperature,
                "runs": len(runs),
                "median_ttft_ms": round(statistics.median(r["ttft_ms"] for r in runs), 3),
                "ttft_over_plain": round(geomean(ratios), 4) if ratios else None,
            }
        )
    return sorted(rows, key=lambda r: (r["temperature"], r["mode"] != "plain"))


def render_ttft(rows: Sequence[dict], results: Sequence[dict]) -> list[str]:
    """The report.md section: per mode, then per prompt at each temperature."""
    if not rows:
        return []
    lines = [
        "",
        "## Time to first token",
        "",
        "From the generation request to the first token: the prompt's evaluation (every run "
        "starts with both caches holding the prompt, so little is left of it), the drafters' "
        "preparation and the first round. `× plain`: each run against plain's on the same "
        "prompt and repeat, geometric mean.",
        "",
        "| mode | T | runs | median ms | × plain |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = "–" if r["ttft_over_plain"] is None else f"{r['ttft_over_plain']:.2f}×"
        lines.append(
            f"| {r['mode']} | {r['temperature']:g} | {r['runs']} | "
            f"{r['median_ttft_ms']:.1f} | {ratio} |"
        )
    prompts = list(dict.fromkeys(r["prompt"] for r in results))
    for t in sorted({r["temperature"] for r in rows}):
        present = [r["mode"] for r in rows if r["temperature"] == t]
        lines += ["", f"Median ms per prompt, T = {t:g}:", ""]
        lines += ["| prompt | " + " | ".join(present) + " |", "|---|" + "---|" * len(present)]
        for p in prompts:
            cells = []
            for lb in present:
                runs = [
                    r["ttft_ms"]
                    for r in results
                    if r["prompt"] == p and r["temperature"] == t and _label(r) == lb
                ]
                cells.append(f"{statistics.median(runs):.1f}" if runs else "–")
            lines.append(f"| {p} | " + " | ".join(cells) + " |")
    return lines


def render_first_answer(first: dict | None) -> list[str]:
    """The report.md section on the first answer after a load (empty when not measured)."""
    if not first:
        return []
    medians = first["median_ttft_ms"]
    ratio = first["auto_over_plain"]
    verdict = {True: "PASS", False: "FAIL", None: "n/a"}[first["passed"]]
    lines = [
        "",
        "## First answer after a load",
        "",
        f"Each answer on a pair loaded fresh (median load {first['median_load_s']:.2f} s) with "
        f"an empty cost store of its own, so nothing measured earlier helps: prompt "
        f"`{first['prompt']}` ({first['prompt_tokens']} tokens), T = 0, plain and auto "
        f"alternating.",
        "",
        "Median time to first token: "
        + ", ".join(f"{mode} {ms:.1f} ms" for mode, ms in medians.items())
        + (f"; auto ÷ plain **{ratio:.3f}×**" if ratio is not None else "")
        + f" (goal ≤ {first['goal']:.2f}×: **{verdict}**).",
        "",
        "| mode | repeat | load s | first token ms | answer ms | tokens | stored tables |",
        "|---|---|---|---|---|---|---|",
    ]
    for a in first["answers"]:
        lines.append(
            f"| {a['mode']} | {a['repeat']} | {a['load_s']:.2f} | {a['ttft_ms']:.1f} | "
            f"{a['total_ms']:.1f} | {a['tokens']} | {a['stored_tables']} |"
        )
    return lines
