"""What every step process shares: its options, the deadline, and its result written as JSON."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def options(description: str) -> argparse.ArgumentParser:
    """The options the runner gives every step (a step adds its own)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--result", type=Path, required=True, help="where the JSON goes")
    parser.add_argument("--work", type=Path, required=True, help="models and scratch files")
    parser.add_argument("--out", type=Path, required=True, help="tables and the report")
    parser.add_argument("--small", action="store_true", help="tiny shapes, few sizes (CPU)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-gpu-layers", type=int, default=-1)
    parser.add_argument("--seconds", type=float, default=600.0, help="time this step has")
    return parser


class Deadline:
    """The step's time left: a long measurement stops in time to report what it has.

    Attributes:
        ends: the perf_counter time it ends.
    """

    def __init__(self, seconds: float) -> None:
        self.ends = time.perf_counter() + seconds

    def left(self) -> float:
        return self.ends - time.perf_counter()

    def passed(self, margin: float = 0.0) -> bool:
        return self.left() <= margin


def main(
    description: str,
    run: Callable[[argparse.Namespace, Deadline], dict[str, Any]],
    parser: argparse.ArgumentParser | None = None,
) -> None:
    """Parse the options, run the step, write what it returned to --result; a result with
    an "error" is written too, and the step then fails (exit status 1) with it."""
    args = (parser or options(description)).parse_args()
    # A few seconds kept back to write the result before the runner's own limit.
    deadline = Deadline(max(1.0, args.seconds - 5.0))
    data = run(args, deadline)
    args.result.write_text(json.dumps(data, indent=1), encoding="utf-8")
    if data.get("error"):
        print(f"error: {data['error']}", file=sys.stderr)
        sys.exit(1)
