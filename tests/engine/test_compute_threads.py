"""A thread that is done computing lets llama.cpp's workers go (engine/llamacpp/compute_threads.py):
idle workers of one thread make libgomp stop spin-waiting in every other thread's passes."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from specchat.bench.live.quality import measure_quality
from specchat.bench.prompts import load_prompts
from specchat.engine.llamacpp.compute_threads import openmp_loaded
from specchat.engine.session import ChatEngine
from specchat.engine.types import Controls, GenerationRequest
from specchat.tinymodels import TinyModels
from tests.helpers.compute_workers import workers_of


@pytest.fixture(scope="module")
def engine(tiny_models: TinyModels) -> Iterator[ChatEngine]:
    # Two threads, so that every pass runs on a team (the tiny model would get one).
    loaded = ChatEngine.load(tiny_models.target, None, n_ctx=512, n_threads=2)
    assert openmp_loaded(), "this build computes without OpenMP: the test has nothing to see"
    yield loaded
    loaded.close()


@pytest.mark.parametrize("whole", [True, False], ids=["whole answer", "closed after a round"])
def test_a_thread_that_answered_leaves_no_workers_behind(engine: ChatEngine, whole: bool) -> None:
    prompt = engine.tokenize_prompt("the river runs and the river runs")

    def answer(mark: Callable[[], None]) -> None:
        generation = engine.generate(GenerationRequest(tuple(prompt), 24, Controls("plain")))
        for _ in generation:
            mark()
            if not whole:
                break
        generation.close()

    during, after = workers_of(answer)
    assert during, "the answer computed without a worker thread"
    assert after == set()


def test_a_thread_that_measured_a_file_leaves_no_workers_behind(tiny_models: TinyModels) -> None:
    prompts = load_prompts()[:2]

    def measure(mark: Callable[[], None]) -> None:
        measure_quality(
            tiny_models.target,
            tiny_models.target,
            prompts=prompts,
            tokens_per_prompt=16,
            requantised=False,
            threads=2,
            progress=lambda done, total: mark(),
        )

    during, after = workers_of(measure)
    assert during, "the measurement computed without a worker thread"
    assert after == set()
