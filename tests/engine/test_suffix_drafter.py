"""The suffix drafter in the round loop: exact output, trees, origins, the sampling law."""

from __future__ import annotations

from collections import Counter

import pytest

from specchat.engine.decoding.decoder import SpeculativeDecoder
from specchat.engine.drafting import SuffixDrafter, mode_names
from specchat.engine.drafting.base import LoadedPair
from specchat.engine.llamacpp.model import LlamaModel
from specchat.engine.suffix.index import Source
from specchat.engine.types import TokenKind
from specchat.tinymodels import TinyModels
from tests.helpers.engine import CHAT_PROMPTS, run


def suffix_of(decoder: SpeculativeDecoder) -> SuffixDrafter:
    drafter = decoder.drafters["suffix"]
    assert isinstance(drafter, SuffixDrafter)
    return drafter


def test_it_is_a_mode_everywhere(decoder: SpeculativeDecoder) -> None:
    assert "suffix" in mode_names()
    assert "suffix" in decoder.drafters.names()


@pytest.mark.parametrize("k", [2, 8])
def test_greedy_output_is_plain_and_a_regenerate_is_drafted(
    decoder: SpeculativeDecoder, k: int
) -> None:
    for text in CHAT_PROMPTS:
        prompt = decoder.target.tokenize(text)
        plain = run(decoder, prompt, mode="plain", max_tokens=80)
        first = run(decoder, prompt, mode="suffix", k=k, max_tokens=80)
        again = run(decoder, prompt, mode="suffix", k=k, max_tokens=80)  # regenerate
        assert first.tokens == plain.tokens and again.tokens == plain.tokens, text
        assert again.text == plain.text
        kept = [e for e in again.events if e.kind == TokenKind.ACCEPTED]
        # The answer just given (plain's, indexed as this chat's) is proposed again.
        assert len(kept) >= len(plain.tokens) // 2, text
        assert {e.origin for e in kept} == {Source.CHAT.value}


def test_auto_chooses_it_for_a_regenerate(decoder: SpeculativeDecoder) -> None:
    prompt = decoder.target.tokenize(CHAT_PROMPTS[1])
    plain = run(decoder, prompt, mode="plain", max_tokens=80)
    run(decoder, prompt, mode="auto", max_tokens=80)
    again = run(decoder, prompt, mode="auto", max_tokens=80)
    assert again.tokens == plain.tokens
    assert any(r.choice.mode == "suffix" and r.accepted for r in again.rounds)


def test_a_stored_chat_is_drafted_from_with_its_origin(decoder: SpeculativeDecoder) -> None:
    prompt = decoder.target.tokenize(CHAT_PROMPTS[0])
    plain = run(decoder, prompt, mode="plain", max_tokens=60)
    index = suffix_of(decoder).index
    index.reset_chat()
    index.put("earlier", [*prompt, *plain.tokens])
    assert index.wait_idle(timeout=30)
    spec = run(decoder, prompt, mode="suffix", k=8, max_tokens=60)
    assert spec.tokens == plain.tokens
    origins = Counter(e.origin for e in spec.events if e.kind == TokenKind.ACCEPTED)
    assert origins[Source.HISTORY.value] > 10
    index.drop("earlier")


def test_a_tree_keeps_the_branch_the_target_follows(decoder: SpeculativeDecoder) -> None:
    """The most frequent continuation is wrong; the runner-up is the target's: one pass
    checks both and keeps the runner-up."""
    prompt = decoder.target.tokenize(CHAT_PROMPTS[2])
    plain = run(decoder, prompt, mode="plain", max_tokens=12).tokens
    wrong = [(t + 1) % decoder.target.n_vocab for t in plain]
    index = suffix_of(decoder).index
    index.reset_chat()
    tail = prompt[-6:]
    with index.deferred():
        index.put("a", [*tail, *wrong[:4]])
        index.put("b", [*tail, *wrong[:4]])
        index.put("c", [*tail, *plain[:4]])
    assert index.wait_idle(timeout=30)
    spec = run(decoder, prompt, mode="suffix", k=8, max_tokens=12)
    assert spec.tokens == plain
    first = spec.rounds[0]
    # The first round drafted the wrong path (2 of 3) with the right one as a branch, and
    # kept the branch: its four tokens, then the target's own.
    assert first.choice.mode == "suffix"
    assert first.accepted == 4 and first.rejected == ()
    assert [e.token for e in first.events] == plain[:5]
    for key in ("a", "b", "c"):
        index.drop(key)


def test_sampling_law_matches_plain(tiny_models: TinyModels) -> None:
    """Chi-square as for the draft model (test_sampling_law.py), at T = 0.8.

    Every answer regenerates the same prompt, so the drafter proposes the answers it saw
    before (the likeliest most often), each kept at the target's own odds; one branch only.
    """
    from tests.engine.test_sampling_law import SETTINGS, _answers, _padded, chi_square

    with LlamaModel(tiny_models.target, n_ctx=256, n_threads=1) as target:
        decoder = SpeculativeDecoder(LoadedPair.of(target))
        prompt = target.tokenize("the cat sat")
        plain = _answers(decoder, prompt, "plain", SETTINGS["t0.8"])
        spec = _answers(decoder, prompt, "suffix", SETTINGS["t0.8"])
    drafted = sum(r.drafted for answer in spec for r in answer.rounds)
    rejected = sum(
        any(e.kind == TokenKind.CORRECTED for e in r.events) for a in spec for r in a.rounds
    )
    # Meaningful only if it drafted, and was refused, a lot.
    assert drafted >= len(spec) and rejected >= 200, (drafted, rejected)
    tests = [("tokens 1-2", lambda a: _padded(a)[:2])]
    tests += [(f"token {i + 1}", lambda a, i=i: _padded(a)[i]) for i in range(3)]
    for name, outcome in tests:
        statistic, threshold, bins = chi_square(
            Counter(outcome(a) for a in plain), Counter(outcome(a) for a in spec)
        )
        assert bins >= 5, name
        assert statistic < threshold, f"{name}: chi-square {statistic:.1f} ≥ {threshold:.1f}"


def test_the_engine_is_fed_the_stored_conversations(tiny_models: TinyModels, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from specchat.engine.history import attach_history
    from specchat.engine.session import ChatEngine
    from specchat.store.conversations import ConversationStore

    with ConversationStore(tmp_path / "chats.db") as store:
        chat = store.create("earlier")
        store.add_message(chat.id, "user", "list the planets")
        store.add_message(chat.id, "assistant", "Mercury, Venus, Earth, Mars, Jupiter")
        engine = ChatEngine.load(tiny_models.target, n_ctx=512, n_threads=1)
        try:
            history = attach_history(store, engine)
            assert history is not None and history.wait_idle(timeout=60)
            index = suffix_of(engine.decoder).index
            assert index.stored() == {chat.id}
            store.delete(chat.id)
            assert index.stored() == set()
            history.close()
        finally:
            engine.close()


def test_under_auto_a_tree_rides_in_the_rows_a_cheap_pass_leaves_over(
    decoder: SpeculativeDecoder,
) -> None:
    """A 4-token main path with a 4-token runner-up: at K = 4 the branch does not fit, but
    where a pass of 16 costs less than one of 5 auto pays for 16 rows anyway, and the
    suffix drafter spends them on the branch, which the target follows."""
    from specchat.engine.costs.machine import MachineCosts
    from specchat.engine.costs.table import CostTable
    from tests.engine.test_batch_shapes import JAGGED

    auto = decoder.auto
    saved = auto.costs
    auto.costs = MachineCosts(CostTable(gpu=False))
    auto.costs.seed(JAGGED)
    auto.costs.observe_batch = lambda *args, **kwargs: None  # type: ignore[method-assign]
    prompt = decoder.target.tokenize(CHAT_PROMPTS[2])
    plain = run(decoder, prompt, mode="plain", max_tokens=40).tokens
    wrong = [(t + 1) % decoder.target.n_vocab for t in plain]
    index = suffix_of(decoder).index
    index.reset_chat()
    tail = prompt[-6:]
    try:
        with index.deferred():
            index.put("a", [*tail, *wrong[:4]])
            index.put("b", [*tail, *wrong[:4]])
            index.put("c", [*tail, *plain[:4]])
        assert index.wait_idle(timeout=30)
        index.reset_chat()  # nothing of the plain answer above in "this chat"
        spec = run(decoder, prompt, mode="auto", max_tokens=40)
        assert spec.tokens == plain
        first = spec.rounds[0]
        assert first.choice.mode == "suffix", first.choice.reason
        # The last token and two paths of four are 9 rows; the main path is lengthened to
        # fill the pass of 16 (cheaper than 9 here).
        assert first.choice.k == 4 and first.rows == 16
        assert first.accepted == 4 and [e.token for e in first.events] == plain[:5]
    finally:
        auto.costs = saved
        for key in ("a", "b", "c"):
            index.drop(key)


def test_a_new_conversation_opening_with_the_same_text_drafts_from_an_earlier_chat(
    decoder: SpeculativeDecoder,
) -> None:
    """The same question asked again in a new chat: its drafts come from the earlier chat
    (stored, as the store feeds it), and are labelled so, not "this chat"."""
    from specchat.engine.types import Controls, GenerationRequest, SamplingParams

    prompt = decoder.target.tokenize(CHAT_PROMPTS[0])

    def answer(conversation: int, mode: str) -> list:  # type: ignore[type-arg]
        request = GenerationRequest(
            tuple(prompt), 60, Controls(mode, 8, SamplingParams()), conversation=conversation
        )
        return [e for r in decoder.generate(request) for e in r.events]

    first = answer(1, "plain")
    index = suffix_of(decoder).index
    index.put("conversation 1", [*prompt, *(e.token for e in first)])  # as the store does
    assert index.wait_idle(timeout=30)
    try:
        again = answer(2, "suffix")
        assert [e.token for e in again] == [e.token for e in first]
        origins = Counter(e.origin for e in again if e.kind == TokenKind.ACCEPTED)
        assert origins[Source.HISTORY.value] > 10, origins
        assert origins[Source.CHAT.value] == 0, origins
    finally:
        index.drop("conversation 1")
