"""The engine host directly, in plain Python: jobs in turn, bounded; the window's answers
hold them; the cost table measured between answers; one plain rate for all of them."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from specchat.engine.costs.store import CostStore
from specchat.engine.session import ChatEngine
from specchat.engine.templates.chat_template import ChatMessage
from specchat.engine.types import Controls, GenerationRequest, SamplingParams
from specchat.host.chat_call import ChatCall
from specchat.host.engine_host import RETRY_AFTER_S, EngineHost
from specchat.host.errors import ApiError
from specchat.host.events import ApiEnded, ApiQueue, ApiRound, ApiStarted, HostEvent
from specchat.host.jobs import Failed, Finished, Job, JobEvent, Round, Started
from specchat.host.thread import HostThread
from specchat.tinymodels import TinyModels

GREEDY = SamplingParams(temperature=0.0)


@pytest.fixture
def engine(tiny_models: TinyModels, tmp_path: Path) -> Iterator[ChatEngine]:
    loaded = ChatEngine.load(
        tiny_models.target, n_ctx=1024, n_threads=1, cost_store=CostStore(tmp_path / "costs")
    )
    yield loaded
    loaded.close()


class Asked(Job):
    """A job asking `text`, its events kept in `events` as they are delivered."""

    def __init__(self, text: str = "hello", *, max_tokens: int = 12, stream: bool = False) -> None:
        controls = Controls("plain", 0, GREEDY)
        call = ChatCall("m", (ChatMessage("user", text),), max_tokens, controls, stream=stream)
        self.events: list[JobEvent] = []
        super().__init__(call, deliver=self.events.append, label=f"#{text}")


def counted(function: Callable[[], object]) -> tuple[Callable[[], object], list[int]]:
    """`function`, still called, with a count of its calls."""
    calls: list[int] = []

    def call() -> object:
        calls.append(1)
        return function()

    return call, calls


def test_jobs_are_answered_in_turn_and_a_full_queue_is_refused(engine: ChatEngine) -> None:
    host = EngineHost(engine, capacity=1, profile=False)
    told: list[HostEvent] = []
    host.listener = told.append
    first, second = Asked("first"), Asked("second")
    with pytest.raises(ApiError):
        host.submit(first)  # not started: nothing is taken
    host.start()
    host.submit(first)
    assert host.waiting == 1 and not host.running
    with pytest.raises(ApiError) as refused:
        host.submit(second)
    assert refused.value.status == 503 and refused.value.code == "queue_full"
    assert refused.value.headers["Retry-After"] == str(RETRY_AFTER_S)
    assert host.step()  # answers the first, in one step
    # A whole answer is handed over at its start and its end only, never round by round.
    assert [type(e) for e in first.events] == [Started, Finished]
    assert second.events == []
    assert told[0] == ApiQueue(1, False)
    assert told[1] == ApiQueue(0, True)
    assert told[2] == ApiStarted(1, "#first", "first")
    rounds = [e for e in told if isinstance(e, ApiRound)]
    assert rounds and all(r.job_id == 1 for r in rounds)
    summary = first.events[-1]
    assert isinstance(summary, Finished)
    note = f"{summary.summary.stats.emitted} tokens, {summary.summary.stop.value}"
    assert told[-2:] == [ApiEnded(1, note), ApiQueue(0, False)]
    host.submit(second)  # room again
    assert host.step()
    assert isinstance(second.events[-1], Finished)


def test_a_streamed_answer_is_handed_over_round_by_round(engine: ChatEngine) -> None:
    host = EngineHost(engine, profile=False)
    host.start()
    streamed = Asked("streamed", stream=True)
    host.submit(streamed)
    assert host.step()
    kinds = [type(e) for e in streamed.events]
    assert kinds[0] is Started and kinds[-1] is Finished
    finished = streamed.events[-1]
    assert isinstance(finished, Finished)
    assert kinds.count(Round) == finished.summary.stats.rounds > 1


def test_an_answer_of_the_window_holds_the_jobs_and_the_measurement(engine: ChatEngine) -> None:
    host = EngineHost(engine)
    woken: list[int] = []
    host.wake = lambda: woken.append(1)
    step, passes = counted(engine.profiler.step)
    engine.profiler.step = step  # type: ignore[method-assign]
    assert not engine.profiler.done  # a fresh cost store: the table is owed
    host.start()
    host.begin_answer()
    waiting = Asked()
    host.submit(waiting)
    assert woken  # the driver is told there is work ...
    assert not host.step()  # ... and the step takes none while the window answers
    assert waiting.events == [] and passes == []
    woken.clear()
    host.end_answer()
    assert woken  # the answer's end wakes the driver
    assert host.step()  # the waiting job first
    assert isinstance(waiting.events[-1], Finished) and passes == []
    assert host.step()  # then one timed pass per step
    assert passes == [1]


def test_a_measurement_that_fails_waits_for_the_next_answer(engine: ChatEngine) -> None:
    host = EngineHost(engine)

    def failing() -> int:
        raise RuntimeError("the pass failed")

    engine.profiler.step = failing  # type: ignore[method-assign]
    assert not host.step()
    assert not host.step()  # not tried again ...
    host.begin_answer()
    host.end_answer()
    step, passes = counted(lambda: 1)
    engine.profiler.step = step  # type: ignore[method-assign]
    assert host.step() and passes == [1]  # ... until an answer has ended


def test_stop_tells_every_waiting_job_and_refuses_new_ones(engine: ChatEngine) -> None:
    host = EngineHost(engine, profile=False)
    host.start()
    waiting = [Asked("a"), Asked("b")]
    for made in waiting:
        host.submit(made)
    assert host.stop()
    for made in waiting:
        (event,) = made.events
        assert isinstance(event, Failed) and event.error.status == 503
        assert made.cancel.is_set()
    with pytest.raises(ApiError):
        host.submit(Asked("late"))
    assert not host.step()  # nothing left to answer
    host.start()  # serving again
    again = Asked("again")
    host.submit(again)
    assert host.step() and isinstance(again.events[-1], Finished)


def test_a_job_with_no_pair_loaded_is_refused(engine: ChatEngine) -> None:
    host = EngineHost(profile=False)
    host.start()
    made = Asked()
    host.submit(made)
    assert host.step()
    (event,) = made.events
    assert isinstance(event, Failed) and event.error.status == 503
    assert "no model pair" in event.error.message
    host.attach(engine)
    loaded = Asked()
    host.submit(loaded)
    assert host.step() and isinstance(loaded.events[-1], Finished)


def test_the_window_and_the_jobs_time_one_plain_rate(engine: ChatEngine) -> None:
    host = EngineHost(engine, profile=False)
    host.start()
    host.calibrate(cancel=threading.Event())
    calibrated = host.baseline.calibrated
    assert calibrated is not None and "after loading" in calibrated.source
    # A window's answer, timed as the worker times it.
    plain = host.begin_answer()
    assert plain.meter is host.baseline
    prompt = engine.prepare([ChatMessage("user", "count")], max_tokens=16).tokens
    for result in engine.generate(GenerationRequest(prompt, 16, Controls("plain", 0, GREEDY))):
        plain.observe(result)
    host.end_answer()
    timed = len(host.baseline.recent)
    assert timed > 0
    # A job's plain rounds go to the same meter, and its summary reports that rate.
    made = Asked("more", max_tokens=16)
    host.submit(made)
    assert host.step()
    assert len(host.baseline.recent) > timed
    finished = made.events[-1]
    assert isinstance(finished, Finished)
    assert finished.summary.baseline == host.baseline.current()
    # Another pair: its own rate from the start.
    host.attach(engine)
    assert host.baseline.recent == [] and host.baseline.calibrated is None


def test_the_host_thread_answers_on_its_own_thread_and_stops(engine: ChatEngine) -> None:
    runner = HostThread(engine, capacity=2, calibrate_plain=False, profile=False)
    threads: list[str] = []
    done = threading.Event()

    def deliver(event: JobEvent) -> None:
        threads.append(threading.current_thread().name)
        if isinstance(event, (Finished, Failed)):
            done.set()

    made = Asked("hi")
    made.deliver = deliver
    runner.start()
    assert runner.ready.wait(30)
    runner.submit(made)
    assert done.wait(30)
    assert set(threads) == {"specchat-engine"}
    assert not runner.running and runner.waiting == 0
    assert runner.stop(timeout_s=10)
    with pytest.raises(ApiError):
        runner.submit(Asked())
