"""The agent bench's report: every turn of every task, plain and auto side by side, with the
machine it ran on (CPU flags, the cost curve `auto` priced passes with)."""

from __future__ import annotations

import json
import math
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from specchat.bench.agent.agent_bench import AgentPair
from specchat.bench.agent.agent_loop import AgentTurn

#: CPU flags that decide how fast llama.cpp's kernels run (the rest are left out).
_FLAG_PREFIXES = ("avx", "fma", "f16c", "amx", "sse4", "ssse3", "bmi2", "vnni", "asimd", "sve")
#: Target pass sizes the report's cost curve shows.
CURVE_SIZES = (1, 2, 4, 8, 16, 32, 64)


def cpu_flags() -> dict[str, Any]:
    """The CPU's model name and its SIMD flags (Linux's /proc/cpuinfo; elsewhere the
    platform's processor string alone)."""
    model, flags = platform.processor(), set()
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key == "model name" and value.strip():
            model = value.strip()
        elif key in ("flags", "features"):
            flags |= {f for f in value.split() if f.startswith(_FLAG_PREFIXES)}
    return {"model": model, "flags": sorted(flags)}


def _speed_up(plain: AgentTurn, auto: AgentTurn) -> float | None:
    if plain.decode_tokens_per_s <= 0 or auto.decode_tokens_per_s <= 0:
        return None
    return auto.decode_tokens_per_s / plain.decode_tokens_per_s


def turn_rows(pair: AgentPair) -> list[dict[str, Any]]:
    """Each turn of a task, both modes side by side (as far as both ran)."""
    rows = []
    for number, (plain, auto) in enumerate(zip(pair.plain.turns, pair.auto.turns, strict=False)):
        speed_up = _speed_up(plain, auto)
        rows.append(
            {
                "turn": number,
                "calls": [call.name for call in auto.calls],
                "same_answer": plain.answer == auto.answer,
                "prompt_tokens": auto.prompt_tokens,
                "evaluated": {"plain": plain.evaluated, "auto": auto.evaluated},
                "first_token_s": {
                    "plain": round(plain.first_token_s, 3),
                    "auto": round(auto.first_token_s, 3),
                },
                "completion_tokens": {"plain": plain.tokens, "auto": auto.tokens},
                "decode_tokens_per_s": {
                    "plain": round(plain.decode_tokens_per_s, 2),
                    "auto": round(auto.decode_tokens_per_s, 2),
                },
                "decode_speed_up": None if speed_up is None else round(speed_up, 3),
                "kept_by_source": auto.kept_by_source,
                "in_calls": {"tokens": auto.call_tokens, "kept": auto.call_kept},
            }
        )
    return rows


def _rate(turns: Sequence[AgentTurn]) -> float:
    """Tokens decoded per second over `turns` together."""
    ms = sum(t.decode_ms for t in turns)
    return sum(t.tokens for t in turns) * 1000.0 / ms if ms > 0 else 0.0


def task_summary(pair: AgentPair) -> dict[str, Any]:
    """What the agent spent on one task in each mode: requests, tokens written, those
    inside tool calls and how many of them were kept drafts, whether the check passed;
    and auto's decoding speed over plain's across the task's turns."""
    spent = {}
    for mode in ("plain", "auto"):
        run = getattr(pair, mode)
        spent[mode] = {
            "turns": len(run.turns),
            "tokens": sum(t.tokens for t in run.turns),
            "in_calls": sum(t.call_tokens for t in run.turns),
            "kept_in_calls": sum(t.call_kept for t in run.turns),
            "kept": sum(sum(t.kept_by_source.values()) for t in run.turns),
            "passed": run.passed,
        }
    plain, auto = _rate(pair.plain.turns), _rate(pair.auto.turns)
    speed_up = auto / plain if plain > 0 and auto > 0 else None
    return {**spent, "decode_speed_up": None if speed_up is None else round(speed_up, 3)}


def _overall(pairs: Sequence[AgentPair]) -> dict[str, Any]:
    """All turns' decoding together: tokens over time in each mode, and the geometric mean
    of the turns' speed-ups."""
    totals = {}
    for mode in ("plain", "auto"):
        turns = [t for p in pairs for t in getattr(p, mode).turns]
        tokens = sum(t.tokens for t in turns)
        ms = sum(t.decode_ms for t in turns)
        totals[mode] = tokens * 1000.0 / ms if ms > 0 else 0.0
    # A run that stopped sooner than the other (their answers differed) is compared as far
    # as both went.
    found = (
        _speed_up(a, b) for p in pairs for a, b in zip(p.plain.turns, p.auto.turns, strict=False)
    )
    ratios = [r for r in found if r]
    geomean = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None
    kept: dict[str, int] = {}
    in_calls = {"tokens": 0, "kept": 0}
    for pair in pairs:
        for turn in pair.auto.turns:
            for source, count in turn.kept_by_source.items():
                kept[source] = kept.get(source, 0) + count
            in_calls["tokens"] += turn.call_tokens
            in_calls["kept"] += turn.call_kept
    passed = [p for p in pairs if p.plain.passed and p.auto.passed]
    plain_passed = _rate([t for p in passed for t in p.plain.turns])
    auto_passed = _rate([t for p in passed for t in p.auto.turns])
    return {
        "tasks_passed": {
            mode: sum(getattr(p, mode).passed for p in pairs) for mode in ("plain", "auto")
        },
        "tasks": len(pairs),
        # Speed where the answers are ones a user would keep: tasks both modes finished.
        "passed_decode_speed_up": (
            round(auto_passed / plain_passed, 3) if plain_passed and auto_passed else None
        ),
        "in_calls": in_calls,
        "decode_tokens_per_s": {m: round(v, 2) for m, v in totals.items()},
        "decode_speed_up": round(totals["auto"] / totals["plain"], 3) if totals["plain"] else None,
        "turn_speed_up_geomean": None if geomean is None else round(geomean, 3),
        "kept_by_source": dict(sorted(kept.items(), key=lambda kv: -kv[1])),
        "all_same_answers": all(p.same for p in pairs),
    }


def build_agent_report(
    pairs: Sequence[AgentPair],
    *,
    info: dict[str, Any],
    costs: dict[str, Any],
    set_name: str,
    style: str = "own",
) -> dict[str, Any]:
    """`style`: the tool-call style the chats were rendered in (agent_styles)."""
    return {
        "set": set_name,
        "style": style,
        "info": info,
        "cpu": cpu_flags(),
        "costs": costs,
        "overall": _overall(pairs),
        "tasks": [
            {
                "task": p.task,
                "same_answers": p.same,
                "check_passed": {"plain": p.plain.passed, "auto": p.auto.passed},
                "spent": task_summary(p),
                "turns": turn_rows(p),
                "runs": {"plain": p.plain.to_json(), "auto": p.auto.to_json()},
            }
            for p in pairs
        ],
    }


def summary_lines(report: dict[str, Any]) -> list[str]:
    """One line a turn, and the overall figures."""
    lines = []
    for task in report["tasks"]:
        for row in task["turns"]:
            speed_up = row["decode_speed_up"]
            kept = ", ".join(f"{s} {n}" for s, n in row["kept_by_source"].items()) or "—"
            lines.append(
                f"{task['task']:22} turn {row['turn']}  prompt {row['prompt_tokens']:5d}  "
                f"evaluated {row['evaluated']['plain']:5d}/{row['evaluated']['auto']:<5d} "
                f"first token {row['first_token_s']['plain']:6.2f}/"
                f"{row['first_token_s']['auto']:<6.2f}s  "
                f"decode {row['decode_tokens_per_s']['plain']:6.1f}/"
                f"{row['decode_tokens_per_s']['auto']:<6.1f} tok/s  "
                + (f"×{speed_up:.2f}" if speed_up else "×—")
                + f"  {'+'.join(row['calls']) or 'answer'}  kept: {kept}"
                + _in_calls(row)
                + ("" if row["same_answer"] else "  (answers differ)")
            )
        passed = task["check_passed"]
        lines.append(
            f"{task['task']:22} check after the agent: plain "
            f"{'passed' if passed['plain'] else 'failed'}, auto "
            f"{'passed' if passed['auto'] else 'failed'}"
        )

    overall = report["overall"]
    rates = overall["decode_tokens_per_s"]
    lines.append(
        f"all turns: decode plain {rates['plain']:.1f} tok/s, auto {rates['auto']:.1f} tok/s "
        f"(×{overall['decode_speed_up'] or 0:.2f}; turns' geometric mean "
        f"×{overall['turn_speed_up_geomean'] or 0:.2f})"
    )
    in_calls = overall.get("in_calls") or {}
    if in_calls.get("tokens"):
        lines.append(
            f"inside tool calls (auto): {in_calls['tokens']} tokens written, "
            f"{in_calls['kept']} of them kept drafts"
        )
    return lines


def spending_lines(report: dict[str, Any]) -> list[str]:
    """What the agent spent, task by task (plain/auto), and how many tasks each mode
    finished, with the speed-up over the tasks both finished."""
    lines = [_spent_line(task["task"], task["spent"]) for task in report["tasks"]]
    overall = report["overall"]
    done = overall["tasks_passed"]
    speed_up = overall["passed_decode_speed_up"]
    lines.append(
        f"tasks passed ({report['style']}): plain {done['plain']}/{overall['tasks']}, "
        f"auto {done['auto']}/{overall['tasks']}; decode over the tasks both passed "
        + (f"×{speed_up:.2f}" if speed_up else "×—")
    )
    return lines


def _spent_line(task: str, spent: dict[str, Any]) -> str:
    """A task's spending, plain/auto: requests, tokens, those in calls and kept there."""
    plain, auto = spent["plain"], spent["auto"]
    speed_up = spent["decode_speed_up"]
    return (
        f"{task:22} spent: turns {plain['turns']}/{auto['turns']}  tokens "
        f"{plain['tokens']}/{auto['tokens']}  in calls {plain['in_calls']}/{auto['in_calls']} "
        f"(auto kept {auto['kept_in_calls']})  decode " + (f"×{speed_up:.2f}" if speed_up else "×—")
    )


def _in_calls(row: dict[str, Any]) -> str:
    """Tokens written inside the turn's tool calls and how many of them were kept drafts."""
    found = row.get("in_calls") or {}
    if not found.get("tokens"):
        return ""
    return f"  in calls: {found['kept']}/{found['tokens']} kept"


def write_agent_report(report: dict[str, Any], out: Path) -> Path:
    """`agent.json` and `agent.md` in `out`; returns the Markdown's path."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "agent.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    info, cpu = report["info"], report["cpu"]
    curve = report["costs"].get("curve_ms", {})
    lines = [
        f"# SpecChat agent bench: `{report['set']}`",
        "",
        f"Tool-call style: {report['style']}  ",
        f"Target: {info.get('target')}; draft: {info.get('draft') or '—'}  ",
        f"Backend: {info.get('backend')} ({info.get('kernels', '?')}), "
        f"{info.get('threads')} threads  ",
        f"CPU: {cpu['model']}; flags: {' '.join(cpu['flags']) or '—'}  ",
        "Target pass cost by rows (ms): " + ", ".join(f"{n}: {ms}" for n, ms in curve.items()),
        "",
        "Per turn: plain/auto. Decode speed-up is auto's tokens per second over plain's for "
        "the same request (T = 0: the same answer).",
        "",
        "```",
        *summary_lines(report),
        "```",
        "",
        "Per task, plain/auto: requests, tokens written, those inside tool calls (and of "
        "auto's, the kept drafts), auto's decoding speed over plain's across the task.",
        "",
        "```",
        *spending_lines(report),
        "```",
        "",
    ]
    path = out / "agent.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
