"""`specchat bench --via-api`: every prompt through the engine directly and through the
HTTP API, side by side (the server's overhead, and a prediction's effect through it)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specchat.bench.prompts import BenchPrompt
    from specchat.engine.session import ChatEngine


def run_via_api(
    engine: ChatEngine, prompts: Sequence[BenchPrompt], args: argparse.Namespace
) -> int:
    """Compare, print one line a prompt and the mean, write via-api.json; 1 if the goal
    fails or an answer differs."""
    from specchat.bench.via_api import compare_via_api, write_via_api

    def progress(done: int, total: int) -> None:
        print(f"\rvia API: {done}/{total}", end="", file=sys.stderr, flush=True)

    results = compare_via_api(
        engine, prompts, max_tokens=args.max_tokens, repeat=args.repeat, progress=progress
    )
    print(file=sys.stderr)
    for r in results:
        print(
            f"{r.prompt:32} {r.tokens:5d} tokens  direct {r.tokens / r.direct_s:7.1f} tok/s  "
            f"API {r.tokens / r.api_s:7.1f} tok/s  ×{r.ratio:.3f}"
            + (f"  prediction kept {r.kept_prediction}" if r.kept_prediction else "")
            + ("" if r.same_text else "  (answers differ)")
        )
    report = write_via_api(results, args.out)
    print(
        f"API ÷ direct (geometric mean): {report['api_vs_direct_geomean']:.3f} "
        f"({report['result']}; goal ≥ 0.98)"
    )
    print(f"report: {args.out / 'via-api.json'}")
    return 0 if report["result"] == "PASS" and report["all_same_text"] else 1
