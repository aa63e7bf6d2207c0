"""`specchat models optimise ID`: a CPU-fast (Q4_0) copy of a pair's target, and its quality."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from specchat.commands.user_error import UserError

if TYPE_CHECKING:
    from specchat.bench.live.quality import QualityReport


def add_parser(sub: argparse._SubParsersAction) -> None:
    optimise = sub.add_parser(
        "optimise",
        help="convert a pair's target into Q4_0, the format a CPU verifies cheapest",
        description=(
            "Convert the target of a pair already on disk into Q4_0 with llama.cpp's "
            "quantizer, next to the models, then measure what it costs in quality."
        ),
    )
    optimise.add_argument("pair_id", metavar="PAIR_ID", help="a catalog pair, or a GGUF file")
    optimise.add_argument(
        "--force", action="store_true", help="convert again even if the copy exists"
    )
    optimise.add_argument("--no-quality", action="store_true", help="skip the quality measurement")
    optimise.add_argument("--threads", type=int, default=None, help="threads for the scoring")


def _source(pair_id: str) -> Path:
    candidate = Path(pair_id)
    if candidate.suffix == ".gguf" and candidate.is_file():
        return candidate
    from specchat.commands.pairs import pair_on_disk

    target, _draft = pair_on_disk(pair_id)
    return target


def run(args: argparse.Namespace) -> int:
    from specchat.bench.live.quality import QualityReport, measure_quality
    from specchat.commands.progress import TerminalProgress
    from specchat.engine.llamacpp.model import ModelLoadError
    from specchat.models.optimise import (
        FULL_WEIGHT_FTYPES,
        OptimiseError,
        derived_path,
        optimise,
        quality_path,
    )
    from specchat.models.transfer import format_bytes

    source = _source(args.pair_id)
    output = derived_path(source)
    quality_file = quality_path(output)
    if output.is_file() and not args.force:
        print(f"already optimised: {output} (--force converts again)")
        if quality_file.is_file() and not args.no_quality:
            _print_quality(QualityReport.load(quality_file), quality_file)
            return 0
    else:
        print(f"converting {source.name} ({format_bytes(source.stat().st_size)}) into Q4_0")
        progress = TerminalProgress(role="q4_0")
        try:
            done = optimise(source, output=output, progress=progress)
        except OptimiseError as error:
            progress.close()
            raise UserError(str(error)) from None
        except KeyboardInterrupt:
            progress.close()
            print("specchat: conversion cancelled; no partial file was kept", file=sys.stderr)
            return 130
        progress.close()
        quality_file.unlink(missing_ok=True)  # measured on the file it replaces
        print(f"converted in {done.seconds:.1f} s: {done.path} ({format_bytes(done.size)})")
    if args.no_quality:
        return 0
    from specchat.models.gguf_reader import read_metadata

    file_type = read_metadata(source, keys=("general.file_type",)).get("general.file_type")
    requantised = file_type not in FULL_WEIGHT_FTYPES
    print("measuring quality against the original on the bench's texts ...", file=sys.stderr)
    try:
        report = measure_quality(
            source,
            output,
            requantised=requantised,
            threads=args.threads,
            progress=_QualityBar(),
        )
    except ModelLoadError as error:
        raise UserError(str(error)) from None
    except KeyboardInterrupt:
        print("\nspecchat: quality measurement cancelled", file=sys.stderr)
        return 130
    report.save(quality_file)
    _print_quality(report, quality_file)
    return 0


class _QualityBar:
    """Prompts scored, on stderr."""

    def __call__(self, done: int, total: int) -> None:
        if sys.stderr.isatty():
            end = "\n" if done == total else ""
            print(f"\rscoring: {done}/{total}", end=end, file=sys.stderr, flush=True)
        elif done == total:
            print(f"scored {total} texts and batch sizes", file=sys.stderr, flush=True)


def _print_quality(report: QualityReport, where: Path) -> None:
    for line in report.lines():
        print(line)
    print(f"quality: {where}")
