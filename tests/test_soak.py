"""Soak: memory stays flat per answer after warm-up, and a deliberate leak is caught."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from specchat.memory_soak import GROWTH_PER_ANSWER_LIMIT
from specchat.tinymodels import TinyModels

ANSWERS = 240
#: The first half is warm-up: the tiny pair's RSS settles over about a hundred answers.
WARMUP = 0.5
#: Bytes kept alive per answer by the leaking run: 24 KiB × 240 answers ≈ 5.9 MB.
LEAK = 24 * 1024

#: A fresh interpreter: in a process that already freed memory (this one, after other tests)
#: a leak first refills the free heap, which is resident already, so RSS would not show it.
SOAK = textwrap.dedent(
    """
    import json, sys
    from specchat.engine.session import ChatEngine
    from specchat.memory_soak import soak

    target, draft, answers, warmup, leak = sys.argv[1:6]
    # One decode thread: a second one spin-waiting against other processes on a small
    # shared machine makes even the tiny model crawl.
    engine = ChatEngine.load(target, draft, n_ctx=1024, n_threads=1)
    kept = []

    def on_sample(_):
        if int(leak):
            kept.append(b"x" * int(leak))  # written, so its pages are resident

    report = soak(engine, answers=int(answers), warmup_fraction=float(warmup), max_tokens=48,
                  on_sample=on_sample)
    print(json.dumps({"answers": report.samples[-1].answers, "passed": report.passed,
                      "growth_per_answer": report.growth_per_answer}))
    """
)


def _soak(tiny: TinyModels, leak: int) -> dict[str, float]:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            SOAK,
            str(tiny.target),
            str(tiny.draft_close),
            str(ANSWERS),
            str(WARMUP),
            str(leak),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.slow
def test_memory_is_flat_per_answer_after_warmup(tiny_models: TinyModels) -> None:
    report = _soak(tiny_models, leak=0)
    print(f"\nno leak: {report['growth_per_answer']:.0f} bytes per answer")
    assert report["answers"] == ANSWERS
    assert report["passed"], f"RSS grows {report['growth_per_answer']:.0f} bytes per answer"


@pytest.mark.slow
def test_a_leak_of_a_few_megabytes_is_caught(tiny_models: TinyModels) -> None:
    report = _soak(tiny_models, leak=LEAK)
    print(f"\n{LEAK}-byte leak: {report['growth_per_answer']:.0f} bytes per answer")
    assert not report["passed"]
    # The slope finds the leak's size, give or take the allocator's rounding.
    assert report["growth_per_answer"] > 0.75 * LEAK
    assert report["growth_per_answer"] > 4 * GROWTH_PER_ANSWER_LIMIT
