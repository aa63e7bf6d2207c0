"""Step: batch noise (n rows against one at a time) of a pair's target and draft model."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from gpu_check import child
from gpu_check.pairs import PAIRS, model_file

SIZES, SMALL_SIZES = (2, 4, 8, 16, 32, 64), (2, 4, 8)
#: Tokens cached before the rows compared, as bench/live/quality.py's check.
CACHED = 100


def check(path: Any, args: argparse.Namespace, *, load_mtp: bool = False) -> dict[str, Any]:
    """One model's noise by size, with the spread of its logits to judge it against."""
    from specchat.bench.live.quality import batch_noise
    from specchat.engine.llamacpp.model import LlamaModel

    sizes = SMALL_SIZES if args.small else SIZES
    with LlamaModel(
        path,
        n_ctx=1024,
        n_gpu_layers=args.n_gpu_layers,
        n_threads=args.threads,
        load_mtp=load_mtp,
    ) as model:
        text = "def add(a, b):\n    return a + b\n\nThe quick brown fox jumps over the lazy dog.\n"
        context = model.tokenize(text * 8, add_special=False, parse_special=False)
        noise = batch_noise(model, context, sizes=sizes, cached=CACHED)
        rows = model.decode(context[:8], logits="all")
        top = np.sort(rows, axis=1)[:, -2:]
        return {
            "file": path.name,
            "backend": model.info.backend,
            "noise": {str(n): round(gap, 5) for n, gap in noise.items()},
            "logit_std": round(float(rows.std()), 3),
            "median_top2_margin": round(float(np.median(top[:, 1] - top[:, 0])), 4),
        }


def run(args: argparse.Namespace, deadline: child.Deadline) -> dict[str, Any]:
    pair = next(p for p in PAIRS if p.name == args.pair)
    out = {
        "target": check(
            model_file(args.work, pair.target, small=args.small), args, load_mtp=pair.load_mtp
        )
    }
    if pair.draft and not deadline.passed(margin=20.0):
        out["draft"] = check(model_file(args.work, pair.draft, small=args.small), args)
    return out


if __name__ == "__main__":
    parser = child.options(__doc__ or "")
    parser.add_argument("--pair", required=True)
    child.main(__doc__ or "", run, parser)
