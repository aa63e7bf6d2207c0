"""Stored estimates: what a pair's drafters learnt in one session starts the next one, kept per
pair, and only what sessions that ended normally on a quiet machine taught."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from specchat.engine.costs.priors import DRAFT_MODEL_PRIOR, ESTIMATES_SESSION_CAP
from specchat.engine.costs.store import CostStore
from specchat.engine.drafting import Acceptance, Estimates
from specchat.engine.drafting.draft_model.model_acceptance import TextAcceptance
from specchat.engine.drafting.stored_estimates import bounded
from specchat.engine.session import ChatEngine
from specchat.engine.templates.chat_template import ChatMessage
from specchat.engine.types import Controls, GenerationRequest, StopReason
from specchat.tinymodels import TinyModels
from tests.helpers.engine import answer

MESSAGES = [
    ChatMessage("system", "you are a tiny model " * 4),
    ChatMessage("user", "say something long"),
]
DRAFTING = Controls("draft", 3)


def _load(target: Path, draft: Path, store: CostStore) -> ChatEngine:
    return ChatEngine.load(target, draft, n_ctx=1024, n_threads=1, cost_store=store)


def _learnt(engine: ChatEngine) -> dict[str, dict[str, Any]]:
    return {
        d.name: {e: dict(estimate.learnt()) for e, estimate in Estimates.of(d).items()}
        for d in engine.decoder.drafters
    }


def _curve(engine: ChatEngine) -> list[float]:
    context = engine.prepare(MESSAGES, max_tokens=8).tokens
    offer = engine.decoder.drafters["draft"].offer(context, 8, None)
    assert offer is not None
    return list(offer.curve)


def _prior_acceptance() -> dict[str, object]:
    return dict(TextAcceptance(*DRAFT_MODEL_PRIOR).learnt())


def _learn_one_session(tiny_models: TinyModels, store: CostStore) -> tuple[dict, list[float]]:
    engine = _load(tiny_models.target, tiny_models.draft_close, store)
    try:
        rounds = answer(engine, MESSAGES, max_tokens=64, controls=DRAFTING)
        assert rounds[-1].stop in (StopReason.MAX_TOKENS, StopReason.EOS)
        return _learnt(engine), _curve(engine)
    finally:
        engine.close()


def test_what_a_session_learnt_starts_the_next_load_of_the_pair(
    tiny_models: TinyModels, tmp_path: Path
) -> None:
    store = CostStore(tmp_path)
    learnt, last_curve = _learn_one_session(tiny_models, store)
    assert learnt["draft"]["acceptance"] != _prior_acceptance()

    engine = _load(tiny_models.target, tiny_models.draft_close, store)
    try:
        stored = engine.estimates.stored()
        # The draft model's acceptance and its greedy confidence calibration observed enough.
        assert {"acceptance", "confidence.greedy"} <= set(stored["draft"])
        started = _learnt(engine)
        for drafter, estimates in stored.items():
            for name in estimates:
                assert started[drafter][name] == learnt[drafter][name]
        assert _curve(engine) == last_curve
    finally:
        engine.close()


def test_another_pair_does_not_read_them(tiny_models: TinyModels, tmp_path: Path) -> None:
    store = CostStore(tmp_path)
    _learn_one_session(tiny_models, store)
    engine = _load(tiny_models.target, tiny_models.draft_far, store)
    try:
        assert engine.estimates.stored() == {}
        assert _learnt(engine)["draft"]["acceptance"] == _prior_acceptance()
    finally:
        engine.close()


def test_a_corrupt_or_old_file_is_ignored(tiny_models: TinyModels, tmp_path: Path) -> None:
    store = CostStore(tmp_path)
    _learn_one_session(tiny_models, store)
    (path,) = (tmp_path / "estimates").glob("*.json")
    good = json.loads(path.read_text(encoding="utf-8"))
    old = {**good, "version": good["version"] - 1}
    other_bands = json.loads(json.dumps(good))
    other_bands["drafters"]["draft"]["confidence.greedy"]["seen"] = [1.0]
    other_bands["drafters"]["draft"]["acceptance"]["first_kept"] = "lots"
    for text in ("{not json", json.dumps(old), json.dumps([1, 2]), json.dumps(other_bands)):
        path.write_text(text, encoding="utf-8")
        engine = _load(tiny_models.target, tiny_models.draft_close, store)
        try:
            # Nothing read, or (other bands) read and refused by the estimates themselves.
            assert _learnt(engine)["draft"]["acceptance"] == _prior_acceptance()
            assert answer(engine, MESSAGES, max_tokens=8, controls=DRAFTING)[-1].stop
        finally:
            engine.close()


def test_a_cancelled_answer_stores_nothing(tiny_models: TinyModels, tmp_path: Path) -> None:
    store = CostStore(tmp_path)
    engine = _load(tiny_models.target, tiny_models.draft_close, store)
    try:
        cancel = threading.Event()
        prompt = engine.prepare(MESSAGES, max_tokens=64).tokens
        rounds = []
        for result in engine.generate(GenerationRequest(prompt, 64, DRAFTING), cancel=cancel):
            rounds.append(result)
            if len(rounds) == 8:
                cancel.set()
        assert rounds[-1].stop is StopReason.CANCELLED
        assert not engine.estimates.save()
    finally:
        engine.close()
    assert not list((tmp_path / "estimates").glob("*.json"))


def test_an_answer_on_a_busy_machine_stores_nothing(
    tiny_models: TinyModels, tmp_path: Path
) -> None:
    store = CostStore(tmp_path)
    engine = _load(tiny_models.target, tiny_models.draft_close, store)
    try:
        # Other processes using four cores the whole time.
        engine.estimates.other_cpu = lambda: 4.0 * time.monotonic()
        rounds = answer(engine, MESSAGES, max_tokens=64, controls=DRAFTING)
        assert rounds[-1].stop in (StopReason.MAX_TOKENS, StopReason.EOS)
    finally:
        engine.close()
    assert not list((tmp_path / "estimates").glob("*.json"))


def test_a_session_moves_a_stored_estimate_by_a_bounded_amount() -> None:
    start = {"kept": [0.0, 10.0], "seen": [0.0, 20.0], "observed": 20.0}
    few = {"kept": [1.0, 10.0], "seen": [2.0, 20.0], "observed": 22.0}
    assert bounded(start, few) is None  # too little observed to say
    many = {"kept": [0.0, 10.0], "seen": [0.0, 20.0 + 4 * ESTIMATES_SESSION_CAP]}
    many["observed"] = many["seen"][1]
    state = bounded(start, many)
    assert state is not None
    assert state["observed"] == 20.0 + ESTIMATES_SESSION_CAP
    assert state["seen"] == [0.0, 20.0 + ESTIMATES_SESSION_CAP]


def test_an_acceptance_resumes_where_it_was_learnt() -> None:
    """A head's (and any drafter's own) acceptance goes through the same pair of methods."""
    learnt = Acceptance.prior(0.6, 0.7)
    learnt.update(3, 2)
    learnt.update(4, 0)
    resumed = Acceptance.prior(0.5, 0.5)
    resumed.resume(json.loads(json.dumps(learnt.learnt())))
    assert resumed.learnt() == learnt.learnt()
    assert resumed.expected(4) == learnt.expected(4)
    with pytest.raises(ValueError):
        resumed.resume({**learnt.learnt(), "first_kept": -1.0})
    assert resumed.learnt() == learnt.learnt()  # a refused state changes nothing
