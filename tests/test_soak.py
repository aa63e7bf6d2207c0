"""Soak: memory stays flat per answer after warm-up, and a deliberate leak is caught."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from specchat.engine.session import ChatEngine
from specchat.soak import GROWTH_PER_ANSWER_LIMIT, SoakReport, SoakSample, soak
from specchat.tinymodels import TinyModels

ANSWERS = 240
#: The first half is warm-up: the tiny pair's RSS settles over about a hundred answers.
WARMUP = 0.5
#: Bytes kept alive per answer by the leaking run: 24 KiB × 240 answers ≈ 5.9 MB.
LEAK = 24 * 1024


@pytest.fixture(scope="module")
def engine(tiny_models: TinyModels) -> Iterator[ChatEngine]:
    # One decode thread: a second one spin-waiting against other processes on a small
    # shared machine makes even the tiny model crawl.
    loaded = ChatEngine.load(tiny_models.target, tiny_models.draft_close, n_ctx=1024, n_threads=1)
    yield loaded
    loaded.close()


def _soak(engine: ChatEngine, leak: int) -> SoakReport:
    kept: list[bytes] = []

    def on_sample(_: SoakSample) -> None:
        if leak:
            kept.append(b"x" * leak)  # written, so its pages are resident

    return soak(engine, answers=ANSWERS, warmup_fraction=WARMUP, max_tokens=48, on_sample=on_sample)


@pytest.mark.slow
def test_memory_is_flat_per_answer_after_warmup(engine: ChatEngine) -> None:
    report = _soak(engine, leak=0)
    print(f"\nno leak: {report.growth_per_answer:.0f} bytes per answer")
    assert report.samples[-1].answers == ANSWERS
    assert report.passed, f"RSS grows {report.growth_per_answer:.0f} bytes per answer"


@pytest.mark.slow
def test_a_leak_of_a_few_megabytes_is_caught(engine: ChatEngine) -> None:
    report = _soak(engine, leak=LEAK)
    print(f"\n{LEAK}-byte leak: {report.growth_per_answer:.0f} bytes per answer")
    assert not report.passed
    # The slope finds the leak's size, give or take the allocator's rounding.
    assert report.growth_per_answer > 0.75 * LEAK
    assert report.growth_per_answer > 4 * GROWTH_PER_ANSWER_LIMIT
