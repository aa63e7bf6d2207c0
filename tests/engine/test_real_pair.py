"""Integration on the real default pair (Qwen2.5-Coder 1.5B + 0.5B): exact greedy output."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from specchat.engine.costs.store import CostStore
from specchat.engine.session import ChatEngine
from specchat.engine.templates.chat_template import ChatMessage
from specchat.engine.types import TokenKind
from tests.helpers.engine import run

pytestmark = pytest.mark.real_model

QUESTIONS = (
    "Write a Python function that checks whether a number is prime.",
    "Rename the variable x to total in this code and reply with the code only:\n"
    "def f(items):\n    x = 0\n    for i in items:\n        x += i\n    return x\n",
)

#: The target's top-two logit gap under which a divergence counts as float noise: llama.cpp
#: computes a row slightly differently in a batch than alone.
NEAR_TIE = 0.1


@pytest.fixture(scope="module")
def engine(
    real_pair: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ChatEngine]:
    # A cost table of its own: one another test measured while the machine was busy would
    # size the draft model's drafts (DraftLength) by that spell, not by the pair's agreement.
    target, draft = real_pair
    store = CostStore(tmp_path_factory.mktemp("real-pair-costs"))
    loaded = ChatEngine.load(target, draft, n_ctx=2048, cost_store=store)
    yield loaded
    loaded.close()


@pytest.mark.parametrize("question", QUESTIONS, ids=["write", "edit"])
def test_speculative_greedy_equals_plain_or_diverges_at_a_near_tie(
    engine: ChatEngine, question: str
) -> None:
    prompt = engine.prepare([ChatMessage("user", question)], max_tokens=40).tokens
    plain = run(engine.decoder, prompt, mode="plain", max_tokens=40)
    report = []
    for mode in ("draft", "lookup", "auto"):
        spec = run(engine.decoder, prompt, mode=mode, k=4, max_tokens=40)
        if spec.tokens == plain.tokens:
            report.append(f"{mode}: identical")
            continue
        at = next(
            i for i, (a, b) in enumerate(zip(plain.tokens, spec.tokens, strict=False)) if a != b
        )
        margin = plain.events[at].margin
        report.append(f"{mode}: diverged at token {at}, plain margin {margin:.3f}")
        assert margin < NEAR_TIE, "; ".join(report)
    print("; ".join(report))
    assert plain.text.strip()


def test_draft_model_is_accepted_often_on_the_real_pair(engine: ChatEngine) -> None:
    prompt = engine.prepare([ChatMessage("user", QUESTIONS[1])], max_tokens=32).tokens
    result = run(engine.decoder, prompt, mode="draft", k=4, max_tokens=32)
    stats = result.rounds[-1].stats
    # The 0.5B and 1.5B Coder models agree on most tokens of a code edit.
    assert stats.alpha > 0.5
    assert stats.tau > 1.5
    assert any(e.kind == TokenKind.ACCEPTED for e in result.events)


COPY_QUESTION = (
    "Repeat this code exactly, with no explanation:\n\n```python\n"
    + "".join(
        f"def handle_{name}(request, session):\n"
        f"    user = session.get_user(request.user_id)\n"
        f"    if user is None:\n"
        f"        raise PermissionError('{name}: no such user')\n"
        f"    return session.{name}(user, request.payload)\n\n"
        for name in ("create", "update", "delete", "archive")
    )
    + "```"
)


@pytest.mark.slow
def test_auto_copies_a_long_run_in_passes_longer_than_a_fixed_k(engine: ChatEngine) -> None:
    from specchat.bench.hindsight.replay import read_costs
    from specchat.engine.decoding.schedule import MAX_K

    # Passes priced by the measured 2-core CPU table (a row costs less the longer the pass),
    # so the choice depends on the costs alone, not on what earlier tests' rounds taught.
    engine.decoder.auto.costs = read_costs("cpu")
    prompt = engine.prepare([ChatMessage("user", COPY_QUESTION)], max_tokens=160).tokens
    plain = run(engine.decoder, prompt, mode="plain", max_tokens=160)
    auto = run(engine.decoder, prompt, mode="auto", max_tokens=160)
    assert auto.tokens == plain.tokens
    longest = max(r.drafted for r in auto.rounds)
    kept = max(r.accepted for r in auto.rounds)
    assert longest > MAX_K, [r.choice.reason for r in auto.rounds]
    assert kept > MAX_K


RENAME_QUESTION = (
    "Rename the variable `x` to `total` in this function and change nothing else. Reply with "
    "the full code only.\n\n```python\ndef summarize(values):\n    x = 0\n    count = 0\n"
    "    for value in values:\n        if value is None:\n            continue\n"
    "        x += value\n        count += 1\n    if count == 0:\n        return 0\n"
    "    mean = x / count\n    print('total', x, 'mean', mean)\n    return x\n```"
)


@pytest.mark.slow
def test_a_rename_is_copied_through_its_later_occurrences(
    engine: ChatEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    from specchat.engine.drafting.copies.substitutions import Substitutions

    prompt = engine.prepare([ChatMessage("user", RENAME_QUESTION)], max_tokens=120).tokens
    plain = run(engine.decoder, prompt, mode="plain", max_tokens=120)
    assert plain.text.count("total") >= 4, plain.text
    carried = run(engine.decoder, prompt, mode="lookup", k=8, max_tokens=120)
    lookup = engine.decoder.drafters.get("lookup")
    assert lookup is not None and lookup.substitutions.rules, "no rename learnt"  # type: ignore[attr-defined]
    monkeypatch.setattr(Substitutions, "copy", lambda self, text, k: None)
    broken = run(engine.decoder, prompt, mode="lookup", k=8, max_tokens=120)
    # Exact either way (a divergence only at a near-tie, as above) ...
    for spec in (carried, broken):
        if spec.tokens != plain.tokens:
            at = next(
                i for i, (a, b) in enumerate(zip(plain.tokens, spec.tokens, strict=False)) if a != b
            )
            assert plain.events[at].margin < NEAR_TIE
    # ... and the carried rename needs fewer target passes.
    assert len(carried.rounds) < len(broken.rounds), (len(carried.rounds), len(broken.rounds))
