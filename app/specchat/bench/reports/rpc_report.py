"""The RPC report: plain and auto with the target over RPC at each added round trip, beside
the same prompts on this machine alone; auto's speed-up over plain per prompt and setting."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from specchat.bench.live.records import RunRecord
from specchat.bench.live.runner import BenchOutcome, geomean

#: The setting the others are compared with.
LOCAL = "local"


@dataclass(frozen=True)
class SettingResult:
    """One setting's plain and auto speeds.

    Attributes:
        name: "local", or the added round trip ("5 ms").
        devices: where the target's layers ran (LoadInfo.remote, "" locally).
        plain: plain's tokens per second by prompt.
        auto: auto's tokens per second by prompt.
        curve_ms: the setting's target pass cost by rows, as its run measured it (empty
            where it measured none), and the best speed-up possible at α = 1 beside it.
    """

    name: str
    devices: str
    plain: Mapping[str, float]
    auto: Mapping[str, float]
    curve_ms: Mapping[int, float] = field(default_factory=dict)
    best_lookup: tuple[int, float] | None = None

    def speedups(self) -> dict[str, float]:
        return {
            p: self.auto[p] / self.plain[p] for p in self.plain if self.plain[p] and p in self.auto
        }


def _speeds(records: Sequence[RunRecord], mode: str) -> dict[str, float]:
    """Tokens per second by prompt (all repeats' tokens over all their time), T = 0 runs."""
    tokens: dict[str, int] = {}
    seconds: dict[str, float] = {}
    for record in records:
        if record.variant.mode != mode or record.temperature != 0.0 or record.turn:
            continue
        tokens[record.prompt] = tokens.get(record.prompt, 0) + len(record.tokens)
        seconds[record.prompt] = seconds.get(record.prompt, 0.0) + record.elapsed_s
    return {p: tokens[p] / seconds[p] for p in tokens if seconds[p] > 0}


def setting_result(name: str, devices: str, outcome: BenchOutcome) -> SettingResult:
    physical = outcome.physical
    return SettingResult(
        name,
        devices,
        _speeds(outcome.records, "plain"),
        _speeds(outcome.records, "auto"),
        curve_ms={} if physical is None else dict(physical.batch_ms),
        best_lookup=None if physical is None else physical.best_lookup,
    )


def report(results: Sequence[SettingResult]) -> dict[str, object]:
    """The report as JSON: per setting, plain and auto by prompt, the speed-ups, and the
    issue's goals checked at the largest round trip (auto's geometric-mean speed-up at least
    the local one's, and at least 1.0 on every prompt)."""
    by_name = {r.name: r for r in results}
    settings = []
    for result in results:
        speedups = result.speedups()
        settings.append(
            {
                "setting": result.name,
                "devices": result.devices,
                "plain_tok_s": dict(result.plain),
                "auto_tok_s": dict(result.auto),
                "speedup": speedups,
                "speedup_geomean": geomean(list(speedups.values())),
                "curve_ms": {str(n): round(ms, 2) for n, ms in sorted(result.curve_ms.items())},
                "best_lookup": result.best_lookup,
            }
        )
    goals = []
    remote = [r for r in results if r.name != LOCAL]
    if LOCAL in by_name and remote:
        slowest = remote[-1]
        local_mean = geomean(list(by_name[LOCAL].speedups().values()))
        slow_speedups = slowest.speedups()
        slow_mean = geomean(list(slow_speedups.values()))
        goals.append(
            {
                "goal": f"auto's speed-up at {slowest.name} ≥ its speed-up locally",
                "value": f"{slow_mean:.2f}× vs {local_mean:.2f}×",
                "result": "PASS" if slow_mean >= local_mean else "FAIL",
            }
        )
        worst = min(slow_speedups.values(), default=0.0)
        goals.append(
            {
                "goal": f"auto ≥ 1.0× plain on every prompt at {slowest.name}",
                "value": f"worst {worst:.2f}×",
                "result": "PASS" if worst >= 1.0 else "FAIL",
            }
        )
    return {"settings": settings, "goals": goals}


def markdown(data: Mapping[str, object]) -> str:
    settings = data["settings"]
    assert isinstance(settings, list)
    prompts = sorted({p for s in settings for p in s["speedup"]})
    head = "| prompt | " + " | ".join(s["setting"] for s in settings) + " |"
    lines = [
        "# The target over RPC: auto's speed-up over plain",
        "",
        "Each column: auto's tokens per second over plain's on the same prompt, with the "
        "target on this machine alone (local) or spread over the RPC servers with that much "
        "round trip added to every response.",
        "",
        head,
        "|" + "---|" * (len(settings) + 1),
    ]
    for prompt in prompts:
        cells = [
            f"{s['speedup'][prompt]:.2f}×" if prompt in s["speedup"] else "–" for s in settings
        ]
        lines.append(f"| {prompt} | " + " | ".join(cells) + " |")
    lines.append(
        "| **geometric mean** | "
        + " | ".join(f"**{s['speedup_geomean']:.2f}×**" for s in settings)
        + " |"
    )
    plain = [geomean(list(s["plain_tok_s"].values())) for s in settings]
    lines.append("| plain tok/s (geomean) | " + " | ".join(f"{v:.1f}" for v in plain) + " |")
    lines += [
        "",
        "Devices: "
        + "; ".join(f"{s['setting']}: {s['devices'] or 'this machine'}" for s in settings),
    ]
    curves = [s for s in settings if s.get("curve_ms")]
    if curves:
        lines += ["", "Target pass cost by rows (ms), as each setting measured it:", ""]
        for s in curves:
            curve = s["curve_ms"]
            assert isinstance(curve, dict)
            best = s.get("best_lookup")
            ceiling = f" (best at α = 1: ×{best[1]:.2f} at K = {best[0]})" if best else ""
            lines.append(
                f"- {s['setting']}: " + ", ".join(f"{n}: {ms}" for n, ms in curve.items()) + ceiling
            )
    goals = data.get("goals") or []
    assert isinstance(goals, list)
    if goals:
        lines += ["", "| goal | value | result |", "|---|---|---|"]
        lines += [f"| {g['goal']} | {g['value']} | {g['result']} |" for g in goals]
    return "\n".join(lines) + "\n"


def write(data: Mapping[str, object], out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    json_path, md_path = out / "rpc.json", out / "rpc.md"
    json_path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    md_path.write_text(markdown(data), encoding="utf-8")
    return json_path, md_path
