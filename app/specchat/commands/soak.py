"""`specchat soak`: generate for N minutes and report memory over time."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from specchat.commands.user_error import UserError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--answers", type=int, default=None, help="stop after this many")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--pair", default=None, help="catalog pair id (default: default)")
    source.add_argument("--tiny", action="store_true", help="use built-in tiny models")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument(
        "--threads", type=int, default=None, help="llama.cpp threads (default: all cores)"
    )
    parser.add_argument("--out", type=Path, default=None, help="write samples as JSON here")


def run(args: argparse.Namespace) -> int:
    from specchat.engine.llamacpp.model import ModelLoadError
    from specchat.engine.session import ChatEngine
    from specchat.memory_soak import GROWTH_PER_ANSWER_LIMIT, SoakSample, soak

    with tempfile.TemporaryDirectory(prefix="specchat-soak-") as scratch:
        if args.tiny:
            from specchat.tinymodels import build_tiny_set

            tiny = build_tiny_set(Path(scratch))
            target: Path = tiny.target
            draft: Path | None = tiny.draft_close
        else:
            from specchat.commands.pairs import pair_on_disk

            target, draft = pair_on_disk(args.pair or "default")
        try:
            engine = ChatEngine.load(target, draft, n_ctx=2048, n_threads=args.threads)
        except ModelLoadError as error:
            raise UserError(str(error)) from None

        def show(sample: SoakSample) -> None:
            print(
                f"{sample.elapsed_s:7.1f} s  RSS {sample.rss / 2**20:8.1f} MiB  "
                f"{sample.tokens:7d} tokens  {sample.answers:5d} answers",
                file=sys.stderr,
            )

        try:
            report = soak(
                engine,
                seconds=args.minutes * 60,
                answers=args.answers,
                max_tokens=args.max_tokens,
                on_sample=show,
            )
        except ValueError as error:  # too few answers to tell warm-up from the rest
            raise UserError(f"{error}; give it more --minutes (or a quieter CPU)") from None
        finally:
            engine.close()
    verdict = "PASS" if report.passed else "FAIL"
    last = report.samples[-1]
    print(
        f"soak {verdict}: RSS grows {report.growth_per_answer / 1024:+.2f} KiB per answer "
        f"after warm-up (limit {GROWTH_PER_ANSWER_LIMIT / 1024:.0f} KiB; "
        f"{report.growth_per_answer * 10_000 / 2**20:+.1f} MiB per 10,000 answers); "
        f"RSS {report.warmup_rss / 2**20:.1f} MiB after warm-up, "
        f"{report.final_rss / 2**20:.1f} MiB over the last quarter ({report.growth:+.2%}); "
        f"{last.tokens} tokens, {last.answers} answers in {last.elapsed_s:.0f} s"
    )
    if args.out:
        args.out.write_text(
            json.dumps(
                {
                    "growth": report.growth,
                    "growth_per_answer": report.growth_per_answer,
                    "warmup_rss": report.warmup_rss,
                    "final_rss": report.final_rss,
                    "samples": [s.__dict__ for s in report.samples],
                },
                indent=2,
            )
        )
    return 0 if verdict == "PASS" else 1
