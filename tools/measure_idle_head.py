"""Plain decoding with and without a target's own MTP head loaded, interleaved in one run.

What an unused head costs a user who never drafts with it: the same file is loaded twice
through `ChatEngine.load` (with its MTP layers and head drafter, and `own_head=False`), and
the two answer the same prompts in plain mode, alternating answer by answer so the
machine's drift falls on both alike. It prints each side's median tokens/s, the ratio, and
the C++ floor (llama.cpp's own loop on the same context) of each, so a difference in
llama.cpp's pass shows apart from SpecChat's loop.

Usage:
    python tools/measure_idle_head.py TARGET.gguf [--reps 5] [--max-tokens 64] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "app")]

from specchat.bench.live.physical import cpp_floor  # noqa: E402
from specchat.engine.session import ChatEngine  # noqa: E402
from specchat.engine.templates.chat_message import ChatMessage  # noqa: E402
from specchat.engine.types import Controls, GenerationRequest  # noqa: E402

PROMPTS = (
    "Write a Python function that converts an integer to Roman numerals.",
    "Explain what a hash table is and when a lookup is slow.",
    "Write a short invitation to a neighbourhood picnic.",
    "Turn this CSV into JSON: name,age\nAda,36\nAlan,41",
)


def plain_tok_s(engine: ChatEngine, prompt: tuple[int, ...], max_tokens: int) -> float:
    request = GenerationRequest(prompt, max_tokens, Controls("plain", 1))
    began, tokens, first = 0.0, 0, True
    for round_ in engine.generate(request):
        if first and round_.events:
            # Timed from the first token, as the bench's decode speed is.
            began, first = time.perf_counter(), False
            tokens += len(round_.events) - 1
            continue
        tokens += len(round_.events)
    return tokens / (time.perf_counter() - began)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", type=Path)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    sides = {
        "with head": ChatEngine.load(args.target, n_ctx=2048, n_threads=args.threads),
        "without": ChatEngine.load(args.target, n_ctx=2048, n_threads=args.threads, own_head=False),
    }
    speeds: dict[str, list[float]] = {name: [] for name in sides}
    floors: dict[str, list[float]] = {name: [] for name in sides}
    try:
        print(f"heads: { {n: e.decoder.drafters.names() for n, e in sides.items()} }")
        for rep in range(args.reps):
            for text in PROMPTS:
                order = list(sides.items())
                for name, engine in order if rep % 2 == 0 else order[::-1]:
                    chat = [ChatMessage("user", text)]
                    prompt = tuple(engine.target.tokenize(engine.render(chat)))
                    speeds[name].append(plain_tok_s(engine, prompt, args.max_tokens))
                    floor = cpp_floor(engine.target, prompt, max_tokens=args.max_tokens)
                    floors[name].append(floor.tokens_per_s)
        for name in sides:
            print(
                f"{name:>10}: plain {statistics.median(speeds[name]):6.2f} tok/s, "
                f"llama.cpp's loop {statistics.median(floors[name]):6.2f} tok/s "
                f"({len(speeds[name])} answers)"
            )
        ratio = [a / b for a, b in zip(speeds["with head"], speeds["without"], strict=True)]
        floor_ratio = [a / b for a, b in zip(floors["with head"], floors["without"], strict=True)]
        print(
            f"with head ÷ without, answer by answer: plain {statistics.median(ratio):.3f}×, "
            f"llama.cpp's loop {statistics.median(floor_ratio):.3f}×"
        )
    finally:
        for engine in sides.values():
            engine.close()


if __name__ == "__main__":
    main()
