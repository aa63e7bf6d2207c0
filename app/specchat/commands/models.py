"""`specchat models`: list, fetch, verify and locate the catalog's model pairs."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from specchat.commands.pairs import find_pair, load_engine, load_pairs, pair_on_disk
from specchat.commands.progress import TerminalProgress
from specchat.commands.user_error import UserError

if TYPE_CHECKING:
    from specchat.engine.costs.machine import MachineCosts
    from specchat.models.catalog import ModelPair


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="models_command", metavar="ACTION", required=True)
    sub.add_parser("list", help="show the catalog's pairs and whether they are on disk")
    fetch = sub.add_parser("fetch", help="download a pair (if needed) and verify it")
    fetch.add_argument("pair_id", metavar="PAIR_ID")
    fetch.add_argument(
        "--source",
        choices=("auto", "hub", "mirror"),
        default="auto",
        help="auto: the hub, falling back to the mirror when the hub is unreachable",
    )
    fetch.add_argument(
        "--cpu-target",
        action="store_true",
        help="also fetch the catalog's CPU-format target (Q4_0), where the pair has one",
    )
    verify = sub.add_parser("verify", help="re-hash a pair's files and check them as GGUF")
    verify.add_argument("pair_id", metavar="PAIR_ID")
    path = sub.add_parser("path", help="print the target and draft file paths")
    path.add_argument("pair_id", metavar="PAIR_ID")
    from specchat.commands import models_optimise as optimise

    optimise.add_parser(sub)
    profile = sub.add_parser(
        "profile", help="this machine's pass cost at every batch size (measured if not stored)"
    )
    profile.add_argument("pair_id", metavar="PAIR_ID")
    profile.add_argument("--threads", type=int, default=None, help="decode threads")
    profile.add_argument("--ctx", type=int, default=4096, help="context window")
    profile.add_argument(
        "--gpu-layers", type=int, default=-1, help="layers to offload where the build can (-1: all)"
    )
    profile.add_argument(
        "--remeasure", action="store_true", help="measure again even if a table is stored"
    )
    profile.add_argument(
        "--out", type=Path, metavar="FILE", help="also write a cost file for bench --replay"
    )


def _list() -> int:
    from specchat.models.catalog import UNCHECKED_ENTRY
    from specchat.models.download import locate_file

    catalog = load_pairs()
    for pair in catalog:
        found = [locate_file(model) for _, model in pair.files()]
        state = "on disk" if all(found) else "partly on disk" if any(found) else "not fetched"
        print(f"{pair.id:<18} {pair.name}  [{state}]")
        print(f"  drafter: {pair.drafter.label} ({pair.drafter.description})")
        for role, model in pair.files():
            if model.size:
                size = f"{model.size / 1e9:.2f} GB"
            elif model.mirror:
                size = f"{model.mirror.size / 1e9:.2f} GB from the mirror"
            elif model.approx_size:
                size = f"≈ {model.approx_size}"  # the publisher's rounded figure
            else:
                size = "size known at download"
            print(f"  {role:<6} {model.repo}/{model.filename} ({model.quantisation}, {size})")
        _list_target_variants(pair)
        if not pair.checked:
            print(f"  {UNCHECKED_ENTRY}")
        if pair.note:
            print(f"  {pair.note}")
    return 0


def _list_target_variants(pair: ModelPair) -> None:
    """The other target files: the catalog's CPU format and a copy made by `optimise`."""
    from specchat.models.target_files import TargetVariant, target_files

    for file in target_files(pair):
        if file.variant is TargetVariant.SHIPPED:
            continue
        state = "on disk" if file.path is not None else "not fetched"
        where = file.filename
        if file.variant is TargetVariant.CPU and pair.cpu_target is not None:
            where = f"{pair.cpu_target.repo}/{file.filename}"
        print(f"  {file.variant.value:<6} {where} ({file.quantisation}, {state}): {file.reason}")


def _notifier(role: str) -> Callable[[str], None]:
    def notify(line: str) -> None:
        print(f"{role:<6} {line}", flush=True)

    return notify


def _fetch(pair_id: str, source: str, *, cpu_target: bool = False) -> int:
    from specchat.models.download import DownloadError, fetch_file, locate_file, verify_located

    pair = find_pair(pair_id)
    files = list(pair.files())
    if cpu_target:
        if pair.cpu_target is None:
            raise UserError(f"pair {pair.id!r} names no CPU-format target")
        files.append(("cpu", pair.cpu_target))
    results = {}
    for role, model in files:
        progress = TerminalProgress(role=role)
        located = locate_file(model)
        try:
            if located is not None and source in ("auto", located.source):
                if verify_located(located, progress=progress):
                    progress.close()
                    checked = "verified" if located.checkable else "size checked, NOT verified"
                    print(f"{role:<6} {model.filename}: present, {checked} ({located.source})")
                    results[role] = located.path
                    continue
                progress.close()
                print(f"{role:<6} {model.filename}: present but does not verify; fetching again")
            print(f"{role:<6} {model.filename}: fetching ({source})", flush=True)
            results[role] = fetch_file(
                model,
                source=source,
                progress=progress,
                notify=_notifier(role),
            )
            progress.close()
            fetched = locate_file(model)
            checked = "verified" if fetched is not None and fetched.checkable else "NOT verified"
            print(f"{role:<6} {model.filename}: downloaded, {checked}")
        except DownloadError as error:
            progress.close()
            raise UserError(f"{role} {model.filename}: {error}") from None
    print(f"pair {pair.id!r} ready:")
    for role, path in results.items():
        print(f"  {role:<6} {path}")
    return 0


def _verify(pair_id: str) -> int:
    from specchat.models.download import locate_file, verify_located
    from specchat.models.drafter_check import check_drafter
    from specchat.models.gguf_format import GGUFError
    from specchat.models.gguf_reader import validate

    pair = find_pair(pair_id)
    ok = True
    located_paths = {}
    for role, model in pair.files():
        located = locate_file(model)
        if located is None:
            print(f"{role:<6} {model.filename}: missing (run `specchat models fetch {pair.id}`)")
            ok = False
            continue
        progress = TerminalProgress(role=role)
        # An explicit verify re-hashes even when a stamp vouches for the file.
        good = verify_located(located, progress=progress, use_stamp=False)
        progress.close()
        if not good:
            print(f"{role:<6} {located.path}: size or sha256 does NOT match ({located.source})")
            ok = False
            continue
        try:
            info = validate(located.path)
        except GGUFError as error:
            print(f"{role:<6} {located.path}: not a valid GGUF: {error}")
            ok = False
            continue
        checked = "sha256 ok" if located.checkable else "size ok, sha256 NOT verified (none known)"
        print(f"{role:<6} {located.path}: {checked}, GGUF ok ({len(info.tensors)} tensors)")
        located_paths[role] = located.path
    if len(located_paths) == len(pair.files()):
        verdict = check_drafter(pair.drafter, located_paths["target"], located_paths.get("draft"))
        print(f"compat {'ok' if verdict.ok else 'INCOMPATIBLE'}: {verdict.reason}")
        ok = ok and verdict.ok
    return 0 if ok else 1


def _path(pair_id: str) -> int:
    from specchat.models.download import locate_file

    pair = find_pair(pair_id)
    missing = []
    lines = []
    for role, model in pair.files():
        located = locate_file(model)
        if located is None:
            missing.append(role)
        else:
            lines.append(str(located.path))
    if missing:
        raise UserError(
            f"pair {pair.id!r}: {' and '.join(missing)} not on disk; "
            f"run `specchat models fetch {pair.id}`"
        )
    print("\n".join(lines))
    return 0


def _profile(args: argparse.Namespace) -> int:
    from specchat.engine.costs.profiling import PairProfiler, load_costs
    from specchat.engine.costs.store import CostStore, new_head_table, new_table, sizes_text
    from specchat.engine.costs.table import DRAFT_SIZES
    from specchat.engine.drafting import head_files

    target, draft = pair_on_disk(args.pair_id)
    engine = load_engine(target, draft, args)
    try:
        store = CostStore()
        costs = load_costs(engine.target, engine.draft, head_files=engine.head_files(), store=store)
        if args.remeasure:
            costs.target = new_table(engine.target)
            if engine.draft is not None:
                costs.draft = new_table(engine.draft, rows=DRAFT_SIZES[-1])
            files = head_files(engine.decoder.drafters.pair)
            costs.heads = {
                name: new_head_table(engine.target, name, file) for name, file in files.items()
            }
        heads = engine.decoder.drafters.heads()
        profiler = PairProfiler(
            costs, engine.target, engine.draft, heads=heads, store=store, retime=False
        )
        if not profiler.done:
            bar = _ProfileBar()
            began = time.monotonic()
            profiler.run(progress=bar)
            bar.close()
            print(f"measured in {time.monotonic() - began:.1f} s", file=sys.stderr)
            if profiler.postponed:
                print(
                    "other programs kept the CPU busy: passes timed meanwhile were dropped, "
                    "the rest is measured at a later load (or run this again when it is quiet)",
                    file=sys.stderr,
                )
        else:
            print("stored table (--remeasure measures again)", file=sys.stderr)
        info = engine.info.target
        print(
            f"target {info.description} ({info.path.name}), {info.backend}, "
            f"{info.n_threads} threads, after {costs.target.context_tokens} cached tokens"
        )
        print("  n      pass  × 1 token    per row")
        for line in sizes_text(costs.target):
            print(f"{line}")
        slope = costs.target.slope_ms
        if slope is not None:
            print(
                f"deeper in a chat each row of a pass costs {slope:.2f} ms more per 1,000 "
                f"cached tokens (attention over the cache; a pass of 32 after 2,000 tokens: "
                f"{costs.target.cost_ms(32, 2000) or 0:.0f} ms)"
            )
        if costs.draft is not None and engine.info.draft is not None:
            draft_ms = costs.draft.cost_ms(1)
            one = costs.target.cost_ms(1)
            if draft_ms is not None and one:
                print(
                    f"draft  {engine.info.draft.description} ({engine.info.draft.path.name}): "
                    f"{draft_ms:.1f} ms a token ({draft_ms / one:.2f}× a target token)"
                )
                catchup = costs.draft.catchup_row_ms
                if catchup is not None:
                    print(
                        f"       catching up on unseen text: {catchup:.2f} ms a token "
                        f"({catchup / draft_ms:.2f}× a drafted one)"
                    )
        for line in _head_lines(costs):
            print(line)
        print(f"stored in {store.folder}")
        if args.out is not None:
            costs.name = f"{info.description}, {info.backend}, {info.n_threads} threads"
            try:
                args.out.write_text(json.dumps(costs.to_json(), indent=1), encoding="utf-8")
            except OSError as error:
                raise UserError(f"cannot write {args.out}: {error.strerror or error}") from None
            print(f"cost file: {args.out}")
    finally:
        engine.close()
    return 0


def _head_lines(costs: MachineCosts) -> list[str]:
    """A line per draft head over the target's hidden state: its drafted token's time."""
    from specchat.engine.drafting import mode_info

    one = costs.target.cost_ms(1)
    lines = []
    for name in costs.heads:
        ms = costs.head_token_ms(name)
        if ms is None:
            continue
        relative = f" ({ms / one:.2f}× a target token)" if one else ""
        lines.append(f"head   {mode_info(name).label}: {ms:.2f} ms a drafted token{relative}")
    return lines


class _ProfileBar:
    """Measurement progress on stderr: redrawn on a terminal, every tenth elsewhere."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self._shown = -1

    def __call__(self, n: int, share: float) -> None:
        if self.tty:
            self.stream.write(f"\rmeasuring: pass of {n:>2} tokens, {share * 100:3.0f}% ")
        elif int(share * 10) > self._shown:
            self._shown = int(share * 10)
            self.stream.write(f"measuring: {share * 100:3.0f}%\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def run(args: argparse.Namespace) -> int:
    command = args.models_command
    if command == "list":
        return _list()
    if command == "fetch":
        return _fetch(args.pair_id, args.source, cpu_target=args.cpu_target)
    if command == "verify":
        return _verify(args.pair_id)
    if command == "path":
        return _path(args.pair_id)
    if command == "profile":
        return _profile(args)
    if command == "optimise":
        from specchat.commands import models_optimise as optimise

        return optimise.run(args)
    raise UserError(f"unknown models action {command!r}")
