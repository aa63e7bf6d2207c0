"""Writes the bench's report.json, report.md, report.png and rounds.jsonl."""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from specchat.bench.live.first_answer import goal_line, summary
from specchat.bench.live.index_cost import render_index_cost
from specchat.bench.live.quality import NOISE_CONTEXT
from specchat.bench.live.runner import BenchOutcome, geomean
from specchat.bench.peers.peers_table import render_peers
from specchat.bench.reports.compare import compare, floor_rows, round_table
from specchat.bench.reports.one_row import goal as one_row_goal
from specchat.bench.reports.one_row import one_row_check
from specchat.bench.reports.replay_report import render_replay, replay_section
from specchat.bench.reports.session_report import render_sessions, session_goals, session_rows
from specchat.bench.reports.ttft_report import render_first_answer, render_ttft, ttft_rows

#: The goals of issue 4, as ratios measured in one run.
FLOOR_GOAL = 0.97
AUTO_FLOOR_GOAL = 0.97
EDIT_GOAL = 1.8
EDIT_CATEGORY = "code-editing"


@dataclass(frozen=True)
class Goal:
    """One goal check.

    Attributes:
        name: what is checked.
        passed: PASS or FAIL (None: not measured in this run).
        detail: the numbers behind the verdict.
    """

    name: str
    passed: bool | None
    detail: str

    @property
    def verdict(self) -> str:
        return {True: "PASS", False: "FAIL", None: "n/a"}[self.passed]


def _label(row: dict) -> str:
    return row["mode"] if row["k"] is None else f"{row['mode']} K={row['k']}"


def _per_prompt_speedups(results: Sequence[dict], mode: str, temperature: float) -> dict:
    """Geometric mean over repeats of one variant's speed-up, per prompt."""
    by_prompt: dict[str, list[float]] = defaultdict(list)
    for row in results:
        if row["mode"] == mode and row["temperature"] == temperature and row["speedup"]:
            by_prompt[row["prompt"]].append(row["speedup"])
    return {p: geomean(v) for p, v in by_prompt.items()}


def check_goals(
    results: Sequence[dict], floors: Sequence[dict], ceilings: dict[str, float] | None = None
) -> list[Goal]:
    ceilings = ceilings or {}
    goals = []
    ratios = [f["plain_over_floor"] for f in floors if f["plain_over_floor"]]
    if ratios:
        gm = geomean(ratios)
        goals.append(
            Goal(
                f"plain ≥ {FLOOR_GOAL}× llama.cpp's own decode loop (geometric mean over prompts)",
                gm >= FLOOR_GOAL,
                f"{gm:.3f}× (per prompt {min(ratios):.3f}–{max(ratios):.3f})",
            )
        )
    else:
        goals.append(
            Goal(f"plain ≥ {FLOOR_GOAL}× llama.cpp's own decode loop", None, "floor not measured")
        )
    temperatures = sorted({r["temperature"] for r in results})
    categories = {r["prompt"]: r["category"] for r in results}
    for t in temperatures:
        auto = _per_prompt_speedups(results, "auto", t)
        if not auto:
            continue
        worst = min(auto, key=lambda p: auto[p])
        detail = (
            f"worst {worst} {auto[worst]:.3f}×, geometric mean {geomean(list(auto.values())):.3f}×"
        )
        # A run where auto drafted nothing did exactly plain's work: its gap is the machine's
        # run-to-run noise, which the reader should be able to tell from a policy's loss.
        drafted: dict[str, int] = defaultdict(int)
        in_run: dict[str, list[float]] = defaultdict(list)
        for row in results:
            if row["mode"] == "auto" and row["temperature"] == t:
                drafted[row["prompt"]] += int(row["drafted"])
                if row.get("in_run_speedup"):
                    in_run[row["prompt"]].append(row["in_run_speedup"])
        below = [p for p, v in sorted(auto.items(), key=lambda kv: kv[1]) if v < AUTO_FLOOR_GOAL]
        if below:
            detail += "; below: " + ", ".join(
                f"{p} {auto[p]:.3f}×"
                + (
                    " (drafted nothing: plain's own work, so run-to-run noise)"
                    if not drafted[p]
                    else ""
                )
                for p in below
            )
        if in_run:
            paired = {p: geomean(v) for p, v in in_run.items()}
            low = min(paired, key=lambda p: paired[p])
            detail += (
                f"; in-run estimate (drafted rounds against the same run's plain rounds): "
                f"worst {low} {paired[low]:.3f}×, geometric mean "
                f"{geomean(list(paired.values())):.3f}×"
            )
        goals.append(
            Goal(
                f"auto ≥ {AUTO_FLOOR_GOAL}× plain on every prompt, T = {t:g}",
                all(v >= AUTO_FLOOR_GOAL for v in auto.values()),
                detail,
            )
        )
    edits = {
        p: v
        for p, v in _per_prompt_speedups(results, "auto", 0.0).items()
        if categories[p] == EDIT_CATEGORY
    }
    goals.append(
        Goal(
            f"auto ≥ {EDIT_GOAL}× plain on {EDIT_CATEGORY} prompts, T = 0",
            all(v >= EDIT_GOAL for v in edits.values()) if edits else None,
            ", ".join(
                f"{p} {v:.3f}×" + (f" (lookup ceiling {ceilings[p]:.2f}×)" if p in ceilings else "")
                for p, v in edits.items()
            )
            or "no such prompts",
        )
    )
    greedy = [r for r in results if r["temperature"] == 0 and r["mode"] != "plain"]
    if greedy:
        bad = [
            r
            for r in greedy
            if not r.get("identical_to_plain") and not r.get("divergence_near_tie")
        ]
        identical = sum(1 for r in greedy if r.get("identical_to_plain"))
        ties = sum(1 for r in greedy if r.get("divergence_near_tie"))
        noisy = sum(1 for r in bad if r.get("divergence_within_noise"))
        detail = f"{identical} identical, {ties} diverge at a near-tie, {len(bad)} otherwise"
        if noisy:
            detail += f" ({noisy} of those within twice the measured batch logit noise)"
        if bad:
            detail += ": " + ", ".join(
                f"{r['prompt']}/{_label(r)} at {r['divergence']} (margin {r['divergence_margin']})"
                for r in bad
            )
        goals.append(
            Goal(
                "T = 0 output identical to plain, or diverging only at a near-tie", not bad, detail
            )
        )
    return goals


def verify_by_batch(outcome: BenchOutcome) -> dict[int, dict[str, float]]:
    """In-engine target pass cost by batch size n = drafted + 1 (mean, rounds)."""
    sums: dict[int, list[float]] = defaultdict(list)
    for r in outcome.records:
        for log in r.round_logs:
            sums[log.drafted + 1].append(log.verify_ms)
    return {n: {"mean_ms": sum(v) / len(v), "rounds": len(v)} for n, v in sorted(sums.items())}


def build_report(outcome: BenchOutcome) -> dict:
    results = compare(outcome)
    floors = floor_rows(outcome)
    goals = check_goals(results, floors, outcome.ceilings)
    sessions = session_rows(results)
    if sessions:
        goals += [Goal(*goal) for goal in session_goals(sessions, outcome.ceilings)]
    first = summary(outcome.first_answer)
    if first is not None:
        goals.append(Goal(*goal_line(first)))
    physical = outcome.physical.to_json() if outcome.physical else None
    if outcome.physical is not None and physical is not None:
        # Is the curve the ceilings and replays price with the pass the rounds really paid?
        check = one_row_check(outcome.physical.batch_ms[1], outcome.records)
        physical["one_row_check"] = check
        goals.append(Goal(*one_row_goal(check)))
    peers = None if outcome.peers is None else outcome.peers.section(outcome.records)
    config = outcome.config
    return {
        "info": outcome.info,
        "config": {
            "modes": list(config.modes),
            "ks": list(config.ks),
            "temperatures": list(config.temperatures),
            "sampled_modes": list(config.sampled_modes),
            "max_tokens": config.max_tokens,
            "repeat": config.repeat,
            "first_answer": config.first_answer,
        },
        "physical": physical,
        "floor": floors,
        "verify_by_batch": {
            str(n): {"mean_ms": round(v["mean_ms"], 3), "rounds": v["rounds"]}
            for n, v in verify_by_batch(outcome).items()
        },
        "lookup_ceiling": {p: round(v, 3) for p, v in outcome.ceilings.items()},
        "replay": replay_section(outcome),
        "goals": [{"name": g.name, "result": g.verdict, "detail": g.detail} for g in goals],
        "sessions": sessions,
        "ttft": ttft_rows(results),
        "first_answer": first,
        "kv_cache": outcome.kv_cache or None,
        "peers": peers,
        "results": results,
    }


def write_report(outcome: BenchOutcome, out_dir: Path, *, png: bool = True) -> dict:
    """Write every report file into `out_dir`; returns the report.json object."""
    out_dir.mkdir(parents=True, exist_ok=True)
    report = build_report(outcome)
    (out_dir / "report.json").write_text(
        json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    with (out_dir / "rounds.jsonl").open("w", encoding="utf-8") as handle:
        for row in round_table(outcome):
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    (out_dir / "report.md").write_text(render_markdown(report), encoding="utf-8")
    if png:
        try:
            render_png(report, out_dir / "report.png")
        except ImportError:
            # matplotlib is the optional `bench` extra; the numbers matter more than the chart.
            print("specchat bench: matplotlib is not installed; no report.png", file=sys.stderr)
    return report


# --- markdown ------------------------------------------------------------------------------------
def _fmt(value: object, digits: int = 2) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_fmt(c) for c in row) + " |" for row in rows]
    return lines


def _identity(row: dict) -> str:
    if "identical_to_plain" not in row or row["mode"] == "plain":
        return ""
    if row["identical_to_plain"]:
        return "identical"
    tie = "near-tie" if row["divergence_near_tie"] else "NOT a tie"
    if not row["divergence_near_tie"] and row.get("divergence_within_noise"):
        tie += " but within batch noise"
    return f"diverges @{row['divergence']} ({tie}, margin {_fmt(row['divergence_margin'])})"


def _kv_cache_lines(kv: dict | None) -> list[str]:
    """Which key cache the run used, and the batch noise of each (bench/live/kv_noise.py)."""
    if not kv:
        return []
    caches = kv["caches"]
    sizes = list(next(iter(caches.values()))["batch_noise"])
    lines = [
        "",
        "## KV cache",
        "",
        f"This run: `--kv-cache {kv['in_use']}` ({caches[kv['in_use']]['key_type']} keys). "
        "Batch noise: the largest |logit| gap between a batch's rows and the same positions "
        f"decoded one at a time, after {kv['context_tokens']} cached tokens, batch of n:",
        "",
    ]
    rows = [
        (f"{name} ({c['key_type']} keys)", *(f"{c['batch_noise'][n]:.4f}" for n in sizes))
        for name, c in caches.items()
    ]
    return [*lines, *_table(["cache", *(f"n={n}" for n in sizes)], rows), ""]


def _head_cost_lines(physical: dict) -> list[str]:
    """Each draft head's drafted token against a target token (none without heads)."""
    heads = physical.get("head_token_ms") or {}
    one = physical["batch_ms"]["1"]
    return [
        f"Draft head `{name}`: {ms:.2f} ms per drafted token ({ms / one:.2f}× a target token)."
        for name, ms in heads.items()
    ]


def render_markdown(report: dict) -> str:
    info, config, results = report["info"], report["config"], report["results"]
    lines = [
        "# SpecChat bench",
        "",
        f"Target: {info['target']} (`{info['target_file']}`)  ",
        f"Draft: {info['draft'] or '—'} (`{info['draft_file'] or '—'}`)  ",
        f"Backend: {info['backend']} ({info.get('kernels', '?')}), {info['threads']} threads; "
        f"max tokens "
        f"{config['max_tokens']}, repeat {config['repeat']}, K {config['ks']}, "
        f"temperatures {config['temperatures']} (sampled modes: {config['sampled_modes']})",
        "",
        *_kv_cache_lines(report.get("kv_cache")),
        "## Goals",
        "",
    ]
    lines += _table(
        ["goal", "result", "detail"],
        [(g["name"], f"**{g['result']}**", g["detail"]) for g in report["goals"]],
    )
    physical = report["physical"]
    if physical:
        lines += [
            "",
            "## Physical context",
            "",
            f"Target pass over n tokens (logits for every row), after "
            f"{physical['context_tokens']} cached tokens:",
            "",
        ]
        lines += _table(
            ["n", *physical["batch_ms"].keys()],
            [
                ["ms", *physical["batch_ms"].values()],
                ["× one token", *physical["batch_relative"].values()],
            ],
        )
        draft = physical["draft_token_ms"]
        lines += [
            "",
            f"Draft model: {_fmt(draft)} ms per token "
            f"({_fmt(physical['draft_relative'])}× a target token).",
            *_head_cost_lines(physical),
            "",
            f"Best speed-up possible at α = 1: prompt lookup "
            f"{physical['best_lookup']['speedup']:.2f}× (K = {physical['best_lookup']['k']})"
            + (
                f"; draft model {physical['best_draft']['speedup']:.2f}× "
                f"(K = {physical['best_draft']['k']})"
                if physical["best_draft"]
                else ""
            )
            + ".",
            "",
            f"Batched rows against the same positions decoded one at a time, after "
            f"{NOISE_CONTEXT} cached tokens, max |Δ logit|: "
            + ", ".join(f"n = {n}: {v:.3f}" for n, v in physical["logit_noise"].items())
            + ".",
        ]
        check = physical.get("one_row_check")
        if check:
            lines += [
                "",
                f"One-row pass {check['curve_ms']:.2f} ms against the run's rounds without a "
                f"draft, median {check['engine_ms']:.2f} ms ({check['rounds']} rounds): "
                f"{check['ratio']:.3f}×"
                + (
                    "."
                    if check["agrees"]
                    else " — **more than 10 % apart: the ceilings "
                    "and replays above are priced off**."
                ),
            ]
    vb = report["verify_by_batch"]
    if vb:
        lines += ["", "In-engine target pass + verification by batch size (all runs):", ""]
        lines += _table(
            ["n", *vb.keys()],
            [
                ["mean ms", *(v["mean_ms"] for v in vb.values())],
                ["rounds", *(v["rounds"] for v in vb.values())],
            ],
        )
    if report["floor"]:
        lines += ["", "## C++ floor (llama.cpp's decode loop + greedy sampler, T = 0)", ""]
        lines += _table(
            [
                "prompt",
                "repeat",
                "tokens",
                "floor tok/s",
                "plain tok/s",
                "plain ÷ floor",
                "same tokens",
            ],
            [
                (
                    f["prompt"],
                    f["repeat"],
                    f["tokens"],
                    f["tok_s"],
                    f["plain_tok_s"],
                    f["plain_over_floor"],
                    f["identical_to_plain"],
                )
                for f in report["floor"]
            ],
        )
    labels = list(dict.fromkeys(_label(r) for r in results))
    for t in sorted({r["temperature"] for r in results}):
        rows_t = [r for r in results if r["temperature"] == t]
        present = [lb for lb in labels if any(_label(r) == lb for r in rows_t)]
        lines += ["", f"## Speed-up over plain, T = {t:g}", ""]
        prompts = list(dict.fromkeys(r["prompt"] for r in rows_t))
        pivot = []
        for p in prompts:
            cat = next(r["category"] for r in rows_t if r["prompt"] == p)
            cells = []
            for lb in present:
                vals = [
                    r["speedup"]
                    for r in rows_t
                    if r["prompt"] == p and _label(r) == lb and r["speedup"]
                ]
                cells.append(f"{geomean(vals):.2f}×" if vals else "–")
            pivot.append([p, cat, *cells])
        cats = list(dict.fromkeys(r["category"] for r in rows_t))
        for c in cats:
            cells = []
            for lb in present:
                vals = [
                    r["speedup"]
                    for r in rows_t
                    if r["category"] == c and _label(r) == lb and r["speedup"]
                ]
                cells.append(f"**{geomean(vals):.2f}×**" if vals else "–")
            pivot.append([f"*{c}* (geomean)", "", *cells])
        all_cells = []
        for lb in present:
            vals = [r["speedup"] for r in rows_t if _label(r) == lb and r["speedup"]]
            all_cells.append(f"**{geomean(vals):.2f}×**" if vals else "–")
        pivot.append(["**all** (geomean)", "", *all_cells])
        header = ["prompt", "category", *present]
        ceilings = (report.get("lookup_ceiling") or {}) if t == 0 else {}
        # First turns only here; a session's later turns are in its goal's detail.
        ceilings = {p: v for p, v in ceilings.items() if "#" not in p}
        if ceilings:
            # The best any lookup policy could do on plain's answer at the measured costs.
            header.append("lookup ceiling")
            category_of = {r["prompt"]: r["category"] for r in rows_t}
            for row in pivot[: len(prompts)]:
                row.append(f"{ceilings[row[0]]:.2f}×" if row[0] in ceilings else "–")
            for row, c in zip(pivot[len(prompts) : -1], cats, strict=True):
                vals = [v for p, v in ceilings.items() if category_of.get(p) == c]
                row.append(f"**{geomean(vals):.2f}×**" if vals else "–")
            pivot[-1].append(f"**{geomean(list(ceilings.values())):.2f}×**")
        lines += _table(header, pivot)
    lines += render_peers(report.get("peers"))
    lines += render_replay(report.get("replay"))
    lines += render_ttft(report.get("ttft", []), results)
    lines += render_first_answer(report.get("first_answer"))
    lines += render_sessions(report.get("sessions", []))
    lines += render_index_cost(info.get("index_cost") or {})
    lines += ["", "## Every run", ""]
    lines += _table(
        [
            "prompt",
            "mode",
            "T",
            "rep",
            "tokens",
            "kept",
            "tok/s",
            "speed-up",
            "in-run",
            "α",
            "τ",
            "draft ms",
            "verify ms",
            "other ms",
            "auto's rounds",
            "vs plain (T = 0)",
        ],
        [
            (
                r["prompt"] + (f" #{r['turn']}" if r.get("turn") else ""),
                _label(r),
                r["temperature"],
                r["repeat"],
                r["tokens"],
                r["accepted"],
                r["tok_s"],
                r["speedup"],
                r.get("in_run_speedup"),
                r["alpha"],
                r["tau"],
                r["draft_ms"],
                r["verify_ms"],
                r["overhead_ms"],
                " ".join(f"{m}:{n}" for m, n in r["choices"].items())
                if r["mode"] == "auto"
                else "",
                _identity(r),
            )
            for r in results
        ],
    )
    lines += [
        "",
        "Speed-up is tok/s over plain's tok/s for the same prompt, temperature and "
        "repeat, measured in this run; `kept` counts the drafted tokens the target kept; "
        "tok/s excludes prompt evaluation. Every run starts "
        "with both caches holding the prompt. `other ms` is decode time outside drafting "
        "and target passes (Python loop, detokenising). Per-round detail: rounds.jsonl.",
        "",
    ]
    return "\n".join(lines)


# --- figure -------------------------------------------------------------------------------------
def render_png(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = report["results"]
    temps = sorted({r["temperature"] for r in results})
    fig, axes = plt.subplots(len(temps) + 1, 1, figsize=(12, 4 * (len(temps) + 1)), squeeze=False)
    labels = list(dict.fromkeys(_label(r) for r in results if r["mode"] != "plain"))
    for ax, t in zip(axes[:-1, 0], temps, strict=True):
        rows_t = [r for r in results if r["temperature"] == t and r["mode"] != "plain"]
        prompts = list(dict.fromkeys(r["prompt"] for r in rows_t))
        present = [lb for lb in labels if any(_label(r) == lb for r in rows_t)]
        width = 0.8 / max(1, len(present))
        for j, lb in enumerate(present):
            heights = []
            for p in prompts:
                vals = [
                    r["speedup"]
                    for r in rows_t
                    if r["prompt"] == p and _label(r) == lb and r["speedup"]
                ]
                heights.append(geomean(vals) if vals else 0.0)
            xs = [i + (j - (len(present) - 1) / 2) * width for i in range(len(prompts))]
            ax.bar(xs, heights, width, label=lb)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(prompts)))
        ax.set_xticklabels(prompts, rotation=20, ha="right", fontsize=8)
        ax.set_ylabel("speed-up over plain")
        ax.set_title(f"Speed-up per prompt, T = {t:g}")
        if present:
            ax.legend(fontsize=8, ncol=min(len(present), 5))
    ax = axes[-1, 0]
    plotted = False
    for lb in labels:
        drafted: list[int] = []
        accepted: list[int] = []
        for r in results:
            if _label(r) != lb:
                continue
            for i, (d, a) in enumerate(
                zip(r["position_drafted"], r["position_accepted"], strict=True)
            ):
                if i >= len(drafted):
                    drafted.append(0)
                    accepted.append(0)
                drafted[i] += d
                accepted[i] += a
        rates = [a / d for a, d in zip(accepted, drafted, strict=True) if d]
        if rates:
            ax.plot(range(1, len(rates) + 1), rates, marker="o", label=lb)
            plotted = True
    ax.set_xlabel("draft position")
    ax.set_ylabel("acceptance rate")
    ax.set_ylim(0, 1.05)
    ax.set_title("Acceptance per draft position (all prompts and temperatures)")
    # A run where nothing was drafted (auto chose plain throughout) has no line to label.
    if plotted:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
