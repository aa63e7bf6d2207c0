"""`specchat bench --via-api`: every prompt through the engine directly and through the
HTTP API, side by side (the server's overhead, and a prediction's effect through it); a chat
of several turns through the API turn by turn (a follow-up's first token)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specchat.bench.prompts import BenchPrompt
    from specchat.engine.session import ChatEngine


def _progress(what: str) -> Callable[[int, int], None]:
    def progress(done: int, total: int) -> None:
        print(f"\r{what}: {done}/{total}", end="", file=sys.stderr, flush=True)

    return progress


def run_via_api(
    engine: ChatEngine, prompts: Sequence[BenchPrompt], args: argparse.Namespace
) -> int:
    """Run both kinds, print one line a prompt (or turn) and the goals, write their
    reports; 1 if a goal fails or an answer differs."""
    from specchat.bench.api.via_api import ApiRefused
    from specchat.commands.user_error import UserError

    chats = [p for p in prompts if p.turn_count > 1]
    singles = [p for p in prompts if p.turn_count == 1]
    passed = True
    try:
        if singles:
            passed = _compare(engine, singles, args) and passed
        if chats:
            passed = _follow_ups(engine, chats, args) and passed
        if singles and getattr(args, "peers", False):
            from specchat.commands import bench_peers

            # The same requests to llama-server through the same client (bench/peers).
            passed = bench_peers.via_api(engine, singles, args) and passed
    except ApiRefused as error:
        print(file=sys.stderr)
        raise UserError(str(error)) from None
    return 0 if passed else 1


def _compare(engine: ChatEngine, prompts: Sequence[BenchPrompt], args: argparse.Namespace) -> bool:
    from specchat.bench.api.via_api import compare_via_api, write_via_api

    results = compare_via_api(
        engine,
        prompts,
        max_tokens=args.max_tokens,
        repeat=args.repeat,
        progress=_progress("via API"),
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
    return bool(report["result"] == "PASS" and report["all_same_text"])


def _follow_ups(
    engine: ChatEngine, prompts: Sequence[BenchPrompt], args: argparse.Namespace
) -> bool:
    from specchat.bench.api.follow_up import (
        FIRST_TOKEN_GOAL_S,
        measure_follow_ups,
        write_follow_ups,
    )

    results = measure_follow_ups(
        engine,
        prompts,
        max_tokens=args.max_tokens,
        progress=_progress("follow-ups"),
    )
    print(file=sys.stderr)
    for r in results:
        for number, t in enumerate(r.turns):
            print(
                f"{r.prompt:32} turn {number}  prompt {t.prompt_tokens:5d} tokens, "
                f"{t.evaluated:5d} evaluated ({t.cached} cached)  "
                f"first token {t.first_token_s:6.3f} s"
            )
    report = write_follow_ups(results, args.out)
    print(
        f"slowest follow-up's first token: {report['slowest_follow_up_first_token_s']:.3f} s "
        f"({report['result']}; goal < {FIRST_TOKEN_GOAL_S} s)"
    )
    print(f"report: {args.out / 'follow-up.json'}")
    return bool(report["result"] == "PASS")
