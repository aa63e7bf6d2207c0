"""Step: write a pair's synthetic files (tools/write_proportional_models.py's way)."""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from gpu_check import child
from gpu_check.pairs import PAIRS, models_dir, proportional, specs


def run(args: argparse.Namespace, deadline: child.Deadline) -> dict[str, Any]:
    pair = next(p for p in PAIRS if p.name == args.pair)
    tool = proportional()
    chosen = specs(small=args.small)
    folder = models_dir(args.work, small=args.small)
    # The quantiser takes every core: it is most of this step's time on real shapes.
    threads = args.threads if args.small else os.cpu_count() or args.threads
    written: dict[str, Any] = {}
    for name in pair.files:
        spec = chosen[name]
        path = folder / spec.file_name
        began = time.perf_counter()
        if not path.exists():
            tool.write_file(spec, folder, threads=threads, quiet=True)
        written[name] = {
            "file": path.name,
            "mib": round(path.stat().st_size / 2**20, 1),
            "format": spec.ftype,
            "seconds": round(time.perf_counter() - began, 2),
        }
    return {"files": written}


if __name__ == "__main__":
    parser = child.options(__doc__ or "")
    parser.add_argument("--pair", required=True)
    child.main(__doc__ or "", run, parser)
