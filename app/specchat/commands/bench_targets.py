"""`specchat bench --targets A,B`: each target benchmarked in one run, then side by side."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from specchat.commands.pairs import load_engine
from specchat.commands.user_error import UserError

if TYPE_CHECKING:
    from collections.abc import Callable

    from specchat.bench.live.runner import BenchConfig, BenchProgress
    from specchat.bench.prompts import BenchPrompt

HELP = (
    "comma-separated targets to compare in one run: a pair id (its target), ID:cpu (the "
    "catalog's CPU-format file), ID:optimised (made by `specchat models optimise ID`) or a "
    "GGUF file (FILE.gguf:no-head: the file without its own MTP layers loaded, to measure "
    "what the head costs); the draft is the first pair's, or --draft"
)
#: A file target's suffix that loads it without its own MTP head.
NO_HEAD = ":no-head"


class BenchTarget(NamedTuple):
    """One target of the run: its label in the reports, its file, and whether its own MTP
    layers are loaded."""

    label: str
    path: Path
    own_head: bool = True


def resolve(
    text: str, *, draft: Path | None, source: str
) -> tuple[list[BenchTarget], Path | None, int]:
    """A BenchTarget per spec, the draft to use, and the first pair's K."""
    from specchat.models.catalog import CatalogError, get_pair
    from specchat.models.download import fetch_pair
    from specchat.models.target_files import TargetVariant, parse_target_spec

    specs = [spec.strip() for spec in text.split(",") if spec.strip()]
    if not specs:
        raise UserError("--targets: give at least one target")
    targets: list[BenchTarget] = []
    k = None
    for spec in specs:
        own_head = not spec.endswith(NO_HEAD)
        file = spec if own_head else spec.removesuffix(NO_HEAD)
        if file.endswith(".gguf"):
            path = Path(file)
            if not path.is_file():
                raise UserError(f"--targets: no such file {file}")
            label = path.stem if own_head else f"{path.stem}{NO_HEAD}"
            targets.append(BenchTarget(label, path, own_head))
            continue
        if not own_head:
            raise UserError(f"--targets: {NO_HEAD} goes after a GGUF file, not {spec}")
        try:
            pair_id, variant = parse_target_spec(spec)
            pair = get_pair(pair_id)
            # The shipped pair is fetched when missing, as --pair does; the draft comes with it.
            files = fetch_pair(pair_id, source=source)
        except (CatalogError, ValueError) as error:
            raise UserError(f"--targets: {error}") from None
        draft = draft or files.draft
        k = pair.k if k is None else k
        if variant is TargetVariant.SHIPPED:
            targets.append(BenchTarget(spec, files.target))
            continue
        from specchat.models.target_files import resolve_target

        found = resolve_target(pair, variant)
        if found is None:
            how = (
                f"run `specchat models optimise {pair_id}`"
                if variant is TargetVariant.OPTIMISED
                else "it downloads from the hub"
            )
            raise UserError(f"--targets: {spec} is not on disk; {how}")
        targets.append(BenchTarget(spec, found))
    labels = [target.label for target in targets]
    if len(set(labels)) != len(labels):
        raise UserError("--targets: a target is named twice")
    return targets, draft, 4 if k is None else k


def _folder(label: str) -> str:
    return re.sub(r"[^\w.-]+", "_", label).strip("_") or "target"


def run_all(
    targets: list[BenchTarget],
    draft: Path | None,
    prompts: tuple[BenchPrompt, ...],
    config: BenchConfig,
    args: argparse.Namespace,
    *,
    progress: Callable[[], Callable[[BenchProgress], None]],
) -> int:
    """Benchmark each target in turn (one loaded at a time), then write the comparison."""
    from dataclasses import replace

    from specchat.bench.live.runner import run_bench
    from specchat.bench.live.targets import summary_lines, write_comparison
    from specchat.bench.reports.report import write_report
    from specchat.commands import bench_peers

    reports: list[tuple[str, dict]] = []
    failed = False
    for label, target, own_head in targets:
        print(f"target {label}: {target}", flush=True)
        engine = load_engine(target, draft, args, label=label, own_head=own_head)
        peers = None
        try:
            outcome = run_bench(engine, prompts, config, progress=progress())
            if getattr(args, "peers", False):
                peers = bench_peers.prepare(engine, prompts, args, draft)
        finally:
            engine.close()
        if peers is not None:
            # After the pair is closed: one model in memory at a time (bench/peers).
            outcome = replace(outcome, peers=bench_peers.run(peers, args))
        report = write_report(outcome, args.out / _folder(label))
        failed = failed or any(g["result"] == "FAIL" for g in report["goals"])
        reports.append((label, report))
    comparison = write_comparison(reports, args.out)
    for line in summary_lines(comparison):
        print(line)
    print(f"side by side: {args.out / 'targets.md'}")
    return 1 if failed else 0
