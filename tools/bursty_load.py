"""A bursty CPU load for a bounded time: N processes, each busy then idle for 0.1–0.8 s at a time.

What a desktop does beside SpecChat (a browser, a build): run it while `specchat models
profile` measures, then bench on a quiet machine, to check that a table measured busy never
makes `auto` slower than plain:

    python tools/bursty_load.py --processes 3 --seconds 120 &
    specchat models profile default --remeasure

Each process alternates a busy spell (a tight loop) and an idle one, each drawn uniformly
from 0.1–0.8 s, so the load comes and goes as llama.cpp's threads time their passes.
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import signal
import sys
import time


def burst(seconds: float, seed: int) -> None:
    """Alternate busy and idle spells of 0.1–0.8 s until `seconds` have passed."""
    rng = random.Random(seed)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        busy_until = min(end, time.monotonic() + rng.uniform(0.1, 0.8))
        while time.monotonic() < busy_until:
            pass
        time.sleep(max(0.0, min(end - time.monotonic(), rng.uniform(0.1, 0.8))))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=3, help="bursty processes (3)")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long, at most 3600")
    parser.add_argument("--seed", type=int, default=0, help="spells' random seed")
    args = parser.parse_args(argv)
    if not 1 <= args.processes <= 64 or not 0 < args.seconds <= 3600:
        print("bursty_load: --processes 1 … 64 and --seconds up to 3600", file=sys.stderr)
        return 2
    workers = [
        multiprocessing.Process(target=burst, args=(args.seconds, args.seed + i), daemon=True)
        for i in range(args.processes)
    ]
    # A plain `kill` of this process must end the load too, not leave the workers spinning.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    for worker in workers:
        worker.start()
    try:
        for worker in workers:
            worker.join()
    except KeyboardInterrupt:
        pass
    finally:
        for worker in workers:
            worker.terminate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
