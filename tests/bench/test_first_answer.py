"""The first answer after a load: fresh pairs, each with an empty cost store of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from specchat.bench.live.first_answer import FirstAnswer, goal_line, measure, plan, summary
from specchat.bench.prompts import BenchPrompt
from specchat.engine.costs.store import CostStore
from specchat.engine.session import ChatEngine
from specchat.tinymodels import TinyModels

PROMPT = BenchPrompt("copy", "abc abc abc the cat the cat", category="code-editing")


def test_the_modes_alternate_and_swap_places_every_repeat() -> None:
    assert plan(3) == [
        (0, "plain"),
        (0, "auto"),
        (1, "auto"),
        (1, "plain"),
        (2, "plain"),
        (2, "auto"),
    ]


def test_each_first_answer_loads_afresh_with_an_empty_private_store(
    tiny_models: TinyModels,
) -> None:
    # The user's store already holds a complete table for this pair: a first answer that
    # found it would be priced with what an earlier run measured.
    default = CostStore()
    warm = ChatEngine.load(tiny_models.target, tiny_models.draft_close, n_ctx=512, n_threads=1)
    try:
        assert warm.profiler.run()
        assert default.load(warm.target).complete
    finally:
        warm.close()
    assert list(default.folder.glob("*.json"))

    seen: list[dict[str, object]] = []

    def load(store: CostStore) -> ChatEngine:
        engine = ChatEngine.load(
            tiny_models.target, tiny_models.draft_close, n_ctx=512, n_threads=1, cost_store=store
        )
        seen.append(
            {
                "folder": store.folder,
                "files": list(store.folder.iterdir()),
                "measured": dict(engine.costs.target.pass_ms),
                "engine": engine,
            }
        )
        return engine

    events: list[tuple[int, int, str]] = []
    answers = measure(load, PROMPT, repeat=2, progress=lambda *event: events.append(event))
    assert [(a.repeat, a.mode) for a in answers] == plan(2)
    assert [done for done, _, _ in events] == [1, 2, 3, 4]
    assert all(total == 4 for _, total, _ in events)
    assert len(seen) == 4
    folders = {load["folder"] for load in seen}
    assert len(folders) == 4 and default.folder not in folders
    for load in seen:
        assert load["files"] == [] and load["measured"] == {}
        assert not Path(str(load["folder"])).exists()  # removed after its answer
        engine = load["engine"]
        assert isinstance(engine, ChatEngine) and engine.target.closed
    for answer in answers:
        assert answer.stored_tables == 0 and answer.measured_sizes == 0
        assert 0 < answer.ttft_ms <= answer.total_ms
        assert 1 <= answer.tokens <= 4 and answer.load_s > 0
        assert answer.prompt == "copy" and answer.prompt_tokens > 0


def _answer(mode: str, repeat: int, ttft_ms: float) -> FirstAnswer:
    return FirstAnswer(mode, repeat, "p", 74, 2.0, ttft_ms, ttft_ms + 50, 4, "/tmp/x", 0, 0)


@pytest.mark.parametrize(
    ("auto_ms", "ratio", "passed"),
    [((1000.0, 1080.0, 5000.0), 1.08, True), ((1200.0, 1300.0, 900.0), 1.2, False)],
)
def test_the_summary_compares_medians_with_the_goal(
    auto_ms: tuple[float, ...], ratio: float, passed: bool
) -> None:
    answers = [_answer("plain", r, ms) for r, ms in enumerate((900.0, 1000.0, 1100.0))]
    answers += [_answer("auto", r, ms) for r, ms in enumerate(auto_ms)]
    first = summary(answers)
    assert first is not None
    assert first["median_ttft_ms"] == {"plain": 1000.0, "auto": pytest.approx(ratio * 1000)}
    assert first["auto_over_plain"] == pytest.approx(ratio)
    assert first["passed"] is passed and len(first["answers"]) == 6
    name, verdict, detail = goal_line(first)
    assert "≤ 1.10× plain's" in name and verdict is passed and f"{ratio:.3f}×" in detail
    assert summary([]) is None
