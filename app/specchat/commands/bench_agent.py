"""`specchat bench --prompts agent` (or `agent-held-back`): the scripted agent's tasks through
`specchat serve`, plain and auto side by side, turn by turn (writes agent.json, agent.md)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from specchat.commands.user_error import UserError

if TYPE_CHECKING:
    from specchat.engine.session import ChatEngine


def run_agent_bench(engine: ChatEngine, set_name: str, args: argparse.Namespace) -> int:
    """Measure the set's tasks, print one line a turn, write the report; 1 if the two modes
    said different things (exactness broken)."""
    from specchat.bench.agent.agent_bench import measure_agents
    from specchat.bench.agent.agent_report import (
        CURVE_SIZES,
        build_agent_report,
        spending_lines,
        summary_lines,
        write_agent_report,
    )
    from specchat.bench.agent.agent_styles import speaking, style_label
    from specchat.bench.agent.agent_tasks import AGENT_SETS_BY_NAME, load_tasks
    from specchat.bench.api.via_api import ApiRefused
    from specchat.bench.live.runner import bench_info
    from specchat.bench.prompts import PromptFileError

    try:
        tasks = load_tasks(AGENT_SETS_BY_NAME[set_name])
    except PromptFileError as error:
        raise UserError(str(error)) from None
    if not args.no_physical:
        # The cost table `auto` prices passes with, measured as the window measures it
        # between answers (stored: a later run reuses it).
        print("specchat bench: measuring this machine's pass costs …", file=sys.stderr)
        engine.profiler.run()

    def progress(done: int, total: int) -> None:
        print(f"\ragent runs: {done}/{total}", end="", file=sys.stderr, flush=True)

    try:
        pairs = measure_agents(
            engine,
            tasks,
            max_tokens=args.max_tokens,
            max_turns=args.agent_turns,
            progress=progress,
            style=args.agent_style,
        )
    except ApiRefused as error:
        print(file=sys.stderr)
        raise UserError(str(error)) from None
    print(file=sys.stderr)
    with speaking(engine, args.agent_style):
        label = style_label(engine)
    # Each size's own pass (not the cheapest pass holding it, which repeats a larger size's
    # figure where that one costs no more).
    curve: dict[str, Any] = {
        str(n): None if (ms := engine.costs.cost_ms(n)) is None else round(ms, 2)
        for n in CURVE_SIZES
    }
    report = build_agent_report(
        pairs,
        info=bench_info(engine),
        costs={"curve_ms": curve, "table": engine.costs.to_json()},
        set_name=set_name,
        style=f"{args.agent_style} ({label})",
    )
    print("\n".join([*summary_lines(report), *spending_lines(report)]))
    print(f"report: {write_agent_report(report, args.out)}")
    return 0 if report["overall"]["all_same_answers"] else 1
