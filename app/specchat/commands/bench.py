"""`specchat bench`: time every drafting mode against plain and llama.cpp, write a report."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from specchat.commands import bench_rpc
from specchat.commands.pairs import add_kv_cache_argument, add_rpc_arguments, load_engine
from specchat.commands.user_error import UserError

if TYPE_CHECKING:
    from specchat.bench.live.first_answer import FirstAnswer
    from specchat.bench.prompts import BenchPrompt

#: Longest answer unless --max-tokens says otherwise.
DEFAULT_MAX_TOKENS = 128
#: The same for an agent's turn: a whole small file written back fits.
AGENT_MAX_TOKENS = 384
#: ... and for the write-back set's, a file of 100 lines written back in a JSON string.
WRITE_BACK_MAX_TOKENS = 2048

#: Modes run unless --modes says otherwise: the fixed modes at the bench's K beside plain and
#: auto, and `heads`, every drafter with a head over the target's hidden state the pair offers.
DEFAULT_MODES = "plain,lookup,draft,heads,auto"
#: Modes run at temperatures above 0 unless --sampled-modes says otherwise: the greedy runs
#: already show what each fixed mode does, and sampled runs double the bench's length.
DEFAULT_SAMPLED_MODES = "plain,auto"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from specchat.engine.drafting.registry import mode_names

    models = parser.add_mutually_exclusive_group()
    models.add_argument("--pair", metavar="ID", help="a catalog pair (fetched if needed)")
    models.add_argument("--target", type=Path, metavar="FILE", help="a target GGUF file")
    from specchat.commands.bench_targets import HELP as TARGETS_HELP

    models.add_argument("--targets", metavar="A,B", help=TARGETS_HELP)
    parser.add_argument(
        "--draft", type=Path, metavar="FILE", help="a draft GGUF file (with --target)"
    )
    parser.add_argument(
        "--prompts",
        metavar="FILE",
        help="JSON Lines prompt file, or a set's name: 'shipped' (the default), 'everyday' "
        "(thirty everyday single-turn prompts), 'attachments', 'predictions' (whole-file "
        "edits sent with the file, no prediction, or a wrong one), 'follow-up' (with "
        "--via-api: a chat about a 2,000-token file, its follow-up's first token), "
        "'held-out' (ten prompts no setting is tuned on), or "
        "'agent' / 'agent-held-back' (a scripted agent's coding tasks through the API with "
        "tools, plain and auto turn by turn; writes agent.json and agent.md) or "
        "'agent-write-back' (tasks that read a 100-line file and write it back changed)",
    )
    parser.add_argument(
        "--agent-turns",
        type=int,
        default=6,
        metavar="N",
        help="with --prompts agent: requests one task may make (default 6)",
    )
    parser.add_argument(
        "--agent-style",
        choices=("own", "xml"),
        default="own",
        help="with --prompts agent: the tool-call style, the target's own template's "
        "('own': the default target's writes JSON arguments) or Qwen3.5's XML-style "
        "<parameter> calls ('xml'), rendered for the same target",
    )
    parser.add_argument(
        "--modes",
        default=DEFAULT_MODES,
        help=f"comma-separated, or 'all': {', '.join(mode_names())}, or 'heads' (every "
        f"drafter with a head over the target's hidden state the pair offers; default "
        f"{DEFAULT_MODES})",
    )
    parser.add_argument(
        "--k",
        default=None,
        help="comma-separated draft lengths for the fixed modes (default: the pair's K, else 4)",
    )
    parser.add_argument(
        "--temperature", default="0,0.8", help="comma-separated sampling temperatures"
    )
    parser.add_argument(
        "--sampled-modes",
        default=DEFAULT_SAMPLED_MODES,
        help="modes also run at temperatures above 0 ('all' for every mode, 'heads' for the "
        "pair's heads)",
    )
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        help=f"longest answer (default {DEFAULT_MAX_TOKENS}; {AGENT_MAX_TOKENS} a turn for "
        "the agent sets)",
    )
    parser.add_argument("--repeat", type=int, default=1, help="run the whole set R times")
    parser.add_argument("--threads", type=int, default=None, help="decode threads")
    parser.add_argument("--ctx", type=int, default=4096, help="context window")
    add_kv_cache_argument(parser)
    add_rpc_arguments(parser)
    bench_rpc.add_arguments(parser)
    parser.add_argument(
        "--gpu-layers", type=int, default=-1, help="layers to offload where the build can (-1: all)"
    )
    parser.add_argument(
        "--source",
        choices=("auto", "hub", "mirror"),
        default="auto",
        help="where --pair files come from if not on disk yet",
    )
    parser.add_argument("--no-floor", action="store_true", help="skip llama.cpp's own decode loop")
    parser.add_argument(
        "--no-physical", action="store_true", help="skip the batch-cost measurement"
    )
    parser.add_argument(
        "--no-first-answer",
        action="store_true",
        help="skip timing the first answer after a fresh load (plain and auto, --repeat "
        "loads each)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="folder for report.json, report.md, report.png, rounds.jsonl (replay: replay.json)",
    )
    parser.add_argument(
        "--via-api",
        action="store_true",
        help="answer every prompt (auto, T = 0) directly and through `specchat serve`'s API, "
        "side by side (writes via-api.json); a chat of several turns goes through the API "
        "turn by turn, each follow-up's first token timed (writes follow-up.json)",
    )
    from specchat.commands import bench_peers

    bench_peers.add_arguments(parser)
    parser.add_argument(
        "--replay",
        type=Path,
        metavar="ROUNDS",
        help="re-price a bench's rounds.jsonl under --costs instead of running models",
    )
    parser.add_argument(
        "--costs",
        metavar="TABLE",
        help="with --replay: a cost file (`specchat models profile --out`), or a shipped "
        "one: 'cpu' (2-core laptop), 'xeon' (2-core AVX-512 Xeon) or 'gpu' (memory-bound GPU, "
        "published llama.cpp figures), "
        "or 'nothing-pays' (the cpu table with a pass of n rows at n one-token passes)",
    )
    parser.add_argument(
        "--estimates",
        type=Path,
        metavar="FILE",
        help="with --replay: start each answer's drafters where this stored estimates file "
        "left them (a store's cache/costs/estimates/*.json), as a fresh window or server of "
        "the pair would, instead of at their priors",
    )


def _split(text: str, what: str, parse: type) -> tuple:
    try:
        items = tuple(parse(part) for part in text.split(",") if part.strip())
    except ValueError as error:
        raise UserError(f"bad {what} list {text!r}: {error}") from None
    if not items:
        raise UserError(f"empty {what} list")
    return items


def _modes(text: str, what: str) -> tuple[str, ...]:
    """Mode names from a comma list ("all": auto, every registered drafter and plain;
    "heads": every head drafter the pair offers, named once it is loaded)."""
    from specchat.bench.live.runner import HEADS
    from specchat.engine.drafting.registry import mode_names, parse_mode

    if text.strip().lower() == "all":
        return mode_names()
    parts = [p.strip().lower() for p in text.split(",") if p.strip()]
    try:
        return tuple(dict.fromkeys(p if p == HEADS else parse_mode(p) for p in parts))
    except ValueError as error:
        raise UserError(f"{what}: {error}") from None


class BenchBar:
    """Progress on stderr: a redrawn bar on a terminal, one line per run elsewhere."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.started = time.monotonic()

    def __call__(self, event: object) -> None:
        from specchat.bench.live.runner import BenchProgress

        if not isinstance(event, BenchProgress):
            return
        elapsed = time.monotonic() - self.started
        eta = ""
        if event.done and event.done < event.total:
            eta = f" ETA {elapsed / event.done * (event.total - event.done):4.0f}s"
        if self.tty:
            width = 28
            filled = int(width * event.done / max(1, event.total))
            line = (
                f"\r[{'#' * filled}{'-' * (width - filled)}] {event.done}/{event.total}"
                f"{eta} {event.label}"
            )
            self.stream.write(line[:120].ljust(120))
            if event.done == event.total:
                self.stream.write("\n")
        elif event.finished:
            speed = f" {event.last.tok_s:.1f} tok/s" if event.last is not None else ""
            self.stream.write(f"[{event.done}/{event.total}]{eta} {event.label}{speed}\n")
        self.stream.flush()


def _replay(args: argparse.Namespace) -> int:
    from specchat.bench.hindsight.ledger import Ledger
    from specchat.bench.hindsight.replay import (
        NOTHING_PAYS,
        SHIPPED,
        ReplayError,
        read_costs,
        read_traces,
        replay,
        summary_lines,
    )
    from specchat.engine.drafting.stored_estimates import EstimatesFileError, FileEstimates

    if not args.costs:
        names = ", ".join(f"'{name}'" for name in [*SHIPPED, NOTHING_PAYS])
        raise UserError(f"--replay needs --costs TABLE (a cost file, or one of {names})")
    try:
        estimates = None if args.estimates is None else FileEstimates(args.estimates)
        costs = read_costs(args.costs)
        results = replay(read_traces(args.replay), costs, estimates=estimates)
    except (ReplayError, EstimatesFileError) as error:
        raise UserError(str(error)) from None
    print("\n".join(summary_lines(results, costs)))
    if args.out is not None:
        try:
            args.out.mkdir(parents=True, exist_ok=True)
            report = {
                "costs": costs.to_json(),
                "prompts": [r.to_json() for r in results],
                "ledger": Ledger.total([r.ledger for r in results]).to_json(),
            }
            (args.out / "replay.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
        except OSError as error:
            raise UserError(f"cannot write {args.out}: {error.strerror or error}") from None
        print(f"report: {args.out / 'replay.json'}")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.replay is not None:
        return _replay(args)
    if args.pair is None and args.target is None and not args.targets:
        raise UserError(
            "give --pair ID, --target FILE or --targets A,B (or --replay ROUNDS --costs TABLE)"
        )
    if args.out is None:
        raise UserError("--out DIR is required")
    if args.rpc_loopback:
        bench_rpc.colocated_wait_policy()  # before llama.cpp loads, for every column alike
    from specchat.bench.agent.agent_tasks import AGENT_SETS_BY_NAME
    from specchat.bench.live.runner import HEADS, BenchConfig, run_bench
    from specchat.bench.prompts import PromptFileError, load_prompts, prompt_file
    from specchat.bench.reports.report import write_report
    from specchat.engine.drafting.registry import AUTO, needs_model

    agents = args.prompts in AGENT_SETS_BY_NAME
    if agents and args.via_api:
        raise UserError(f"--prompts {args.prompts} runs through the API already")
    if args.agent_turns < 1:
        raise UserError("--agent-turns must be at least 1")
    if args.max_tokens is None:
        args.max_tokens = DEFAULT_MAX_TOKENS
        if agents:
            long = args.prompts == "agent-write-back"
            args.max_tokens = WRITE_BACK_MAX_TOKENS if long else AGENT_MAX_TOKENS
    try:
        prompts = (
            () if agents else load_prompts(prompt_file(args.prompts) if args.prompts else None)
        )
    except PromptFileError as error:
        raise UserError(str(error)) from None
    default_k = 4
    draft: Path | None
    if args.pair:
        from specchat.models.catalog import CatalogError, get_pair
        from specchat.models.download import fetch_pair

        try:
            default_k = get_pair(args.pair).k
            files = fetch_pair(args.pair, source=args.source)
        except CatalogError as error:
            raise UserError(str(error)) from None
        target, draft = files.target, files.draft
    elif args.targets:
        from specchat.commands import bench_targets

        targets, draft, default_k = bench_targets.resolve(
            args.targets, draft=args.draft, source=args.source
        )
        target = targets[0].path
        if agents and len(targets) > 1:
            # One target, such as ID:cpu (whose T = 0 answers are plain's exactly).
            raise UserError(f"--prompts {args.prompts} runs one target; give one in --targets")
    else:
        target, draft = args.target, args.draft
    ks = _split(args.k, "K", int) if args.k else (default_k,)
    if any(not 1 <= k <= 16 for k in ks):
        raise UserError("every K must be between 1 and 16")
    temperatures = _split(args.temperature, "temperature", float)
    if any(t < 0 for t in temperatures):
        raise UserError("temperatures must be ≥ 0")
    if args.max_tokens < 1 or args.repeat < 1:
        raise UserError("--max-tokens and --repeat must be at least 1")
    config = BenchConfig(
        modes=_modes(args.modes, "--modes"),
        ks=ks,
        temperatures=temperatures,
        sampled_modes=_modes(args.sampled_modes, "--sampled-modes"),
        max_tokens=args.max_tokens,
        repeat=args.repeat,
        floor=not args.no_floor,
        physical=not args.no_physical,
        first_answer=not args.no_first_answer,
    )
    skipped = [m for m in config.modes if needs_model(m)]
    if draft is None and skipped:
        print(f"specchat bench: no draft model; skipping {', '.join(skipped)}", file=sys.stderr)
    if args.rpc_rtt:
        from specchat.commands.bench_rpc import run_rpc_bench

        return run_rpc_bench(target, draft, prompts, config, args, progress=BenchBar())
    if args.rpc_loopback:
        raise UserError("--rpc-loopback goes with --rpc-rtt")
    if args.targets and not agents:
        return bench_targets.run_all(targets, draft, prompts, config, args, progress=BenchBar)
    engine = load_engine(target, draft, args)
    if agents:
        from specchat.commands.bench_agent import run_agent_bench

        try:
            return run_agent_bench(engine, args.prompts, args)
        finally:
            engine.close()
    if args.via_api:
        from specchat.commands.bench_api import run_via_api

        try:
            return run_via_api(engine, prompts, args)
        finally:
            engine.close()
    peers = None
    try:
        outcome = run_bench(engine, prompts, config, progress=BenchBar())
        if args.peers:
            from specchat.commands import bench_peers

            peers = bench_peers.prepare(engine, prompts, args, draft)
    finally:
        engine.close()
    if peers is not None:
        from specchat.commands import bench_peers

        # After the pair is closed: one model in memory at a time.
        outcome = replace(outcome, peers=bench_peers.run(peers, args))
    unserved = [
        m
        for m in config.modes
        if m not in outcome.config.modes and m != HEADS and not (draft is None and needs_model(m))
    ]
    if unserved:
        print(f"specchat bench: the pair offers no {', '.join(unserved)}; skipped", file=sys.stderr)
    if config.physical:
        # After the pair is closed too: one target in memory at a time.
        outcome = replace(outcome, kv_cache=_cache_noise(target, prompts, args))
    if config.first_answer and AUTO in config.modes:
        # After the bench's pair is closed: one pair in memory at a time, and its files
        # already read once, so no load pays for the disk and another not.
        outcome = replace(outcome, first_answer=_first_answers(target, draft, prompts[0], args))
    report = write_report(outcome, args.out)
    _print_summary(report, args.out)
    failed = [g for g in report["goals"] if g["result"] == "FAIL"]
    return 1 if failed else 0


def _cache_noise(
    target: Path, prompts: Sequence[BenchPrompt], args: argparse.Namespace
) -> dict[str, object]:
    """The cache this run used and each cache type's batch noise (bench/live/kv_noise.py)."""
    from specchat.bench.live.kv_noise import cache_noise

    print("specchat bench: batch noise of each KV cache …", file=sys.stderr)
    return cache_noise(
        target, prompts, in_use=args.kv_cache, n_threads=args.threads, gpu_layers=args.gpu_layers
    )


def _first_answers(
    target: Path, draft: Path | None, prompt: BenchPrompt, args: argparse.Namespace
) -> tuple[FirstAnswer, ...]:
    """Plain's and auto's first answers, each on a pair loaded fresh
    (bench/live/first_answer.py)."""
    from specchat.bench.live.first_answer import measure
    from specchat.bench.live.runner import BenchProgress

    bar = BenchBar()
    return measure(
        lambda store: load_engine(target, draft, args, cost_store=store),
        prompt,
        repeat=args.repeat,
        progress=lambda done, total, label: bar(BenchProgress(done, total, label, finished=True)),
    )


def _print_summary(report: dict, out: Path) -> None:
    physical = report["physical"]
    if physical:
        costs = ", ".join(
            f"n={n}: {ms:.0f} ms ({report['physical']['batch_relative'][n]:.2f}×)"
            for n, ms in physical["batch_ms"].items()
        )
        print(f"target pass: {costs}")
        if physical["draft_token_ms"] is not None:
            print(
                f"draft token: {physical['draft_token_ms']:.1f} ms "
                f"({physical['draft_relative']:.2f}× a target token)"
            )
        one = physical["batch_ms"]["1"]
        for name, ms in (physical.get("head_token_ms") or {}).items():
            print(f"{name} head: {ms:.2f} ms a drafted token ({ms / one:.2f}× a target token)")
        line = (
            f"best at α = 1: lookup {physical['best_lookup']['speedup']:.2f}× "
            f"(K = {physical['best_lookup']['k']})"
        )
        if physical["best_draft"]:
            line += (
                f", draft model {physical['best_draft']['speedup']:.2f}× "
                f"(K = {physical['best_draft']['k']})"
            )
        print(line)
    for row in report["ttft"]:
        ratio = row["ttft_over_plain"]
        print(
            f"first token, {row['mode']} T={row['temperature']:g}: median "
            f"{row['median_ttft_ms']:.0f} ms" + (f" ({ratio:.2f}× plain)" if ratio else "")
        )
    first = report["first_answer"]
    if first:
        medians = ", ".join(f"{m} {ms:.0f} ms" for m, ms in first["median_ttft_ms"].items())
        ratio = first["auto_over_plain"]
        loads = len(first["answers"]) // max(1, len(first["median_ttft_ms"]))
        print(
            f"first answer after a load (first token, median of {loads} loads each): "
            f"{medians}"
            + (f"; auto ÷ plain {ratio:.3f}× (goal ≤ {first['goal']:.2f}×)" if ratio else "")
        )
    from specchat.bench.peers.peers_table import summary_lines

    for line in summary_lines(report.get("peers")):
        print(line)
    for goal in report["goals"]:
        print(f"{goal['result']:<4}  {goal['name']}: {goal['detail']}")
    print(f"report: {out / 'report.md'}")
