"""A head over the target's hidden state (engine/llamacpp/hidden_state_head.py) on the tiny
Qwen3.5 MTP target: fed nothing while unused, caught up in one batch before it drafts, with
the drafts of a head fed after every pass; and after a kept state comes back (a prefix-cache
hit), drafting as in a fresh chat."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from specchat.engine.decoding.decoder import SpeculativeDecoder
from specchat.engine.drafting.base import LoadedPair
from specchat.engine.drafting.mtp.mtp_driver import DraftHead
from specchat.engine.llamacpp.kv_store import KVStore
from specchat.engine.llamacpp.model import LlamaModel
from specchat.engine.llamacpp.prefix_cache import PrefixCache
from specchat.tinyarch import write_tiny_qwen35
from tests.helpers.engine import CHAT_PROMPTS, run


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaModel]:
    path: Path = write_tiny_qwen35(tmp_path_factory.mktemp("catch-up") / "q.gguf", seed=1, mtp=True)
    with LlamaModel(path, n_ctx=1024, n_threads=1, load_mtp=True) as model:
        yield model


def _plain_steps(model: LlamaModel, first: int, steps: int) -> int:
    """Greedy one-token passes from `first` (plain rounds); returns the next token."""
    token = first
    for _ in range(steps):
        logits = model.decode([token], logits="last")[0]
        token = int(np.argmax(logits))
    return token


def _drafts(model: LlamaModel, head: DraftHead, prompt: list[int], *, every_round: bool) -> list:
    """The head's drafts at a few points of a plain answer, fed lazily or after every pass."""
    model.reset()
    logits = model.decode(prompt, logits="last")[0]
    token = int(np.argmax(logits))
    drafts = []
    for steps in (1, 5, 20):
        for _ in range(steps):
            logits = model.decode([token], logits="last")[0]
            token = int(np.argmax(logits))
            if every_round:
                head.catch_up()
        drafts.append(head.draft(token, 4))
        # The head's draft is dropped as a rejected verify pass would be.
        model.decode([token], logits="none")
        model.truncate(model.n_past - 1)
    return drafts


def test_a_head_left_unused_is_fed_nothing(hybrid: LlamaModel) -> None:
    head = DraftHead(hybrid)
    try:
        prompt = hybrid.tokenize(CHAT_PROMPTS[0])
        hybrid.decode(prompt, logits="none")
        _plain_steps(hybrid, prompt[-1], 30)
        assert head.lag == hybrid.n_past  # every position kept, none fed
        assert head.ready
        assert head.catch_up() == hybrid.n_past and head.lag == 0
    finally:
        head.close()
        hybrid.reset()


def test_drafts_after_a_catch_up_equal_a_head_fed_every_pass(hybrid: LlamaModel) -> None:
    head = DraftHead(hybrid)
    try:
        prompt = hybrid.tokenize(CHAT_PROMPTS[1])
        lazy = _drafts(hybrid, head, prompt, every_round=False)
        eager = _drafts(hybrid, head, prompt, every_round=True)
    finally:
        head.close()
        hybrid.reset()
    assert lazy == eager and all(lazy)


def test_plain_decoding_on_an_mtp_pair_feeds_its_head_nothing(hybrid: LlamaModel) -> None:
    hybrid.reset()
    decoder = SpeculativeDecoder(LoadedPair.of(hybrid))
    head = decoder.drafters["mtp"].head  # type: ignore[attr-defined]
    prompt = hybrid.tokenize(CHAT_PROMPTS[0])
    plain = run(decoder, prompt, mode="plain", max_tokens=40)
    assert head.lag == hybrid.n_past
    spec = run(decoder, prompt, mode="mtp", k=3, max_tokens=40)
    assert spec.tokens == plain.tokens
    assert sum(r.drafted for r in spec.rounds) > 0


def test_a_head_drafts_after_a_restored_prefix_as_in_a_fresh_chat(hybrid: LlamaModel) -> None:
    hybrid.reset()
    decoder = SpeculativeDecoder(LoadedPair.of(hybrid))
    first = hybrid.tokenize(CHAT_PROMPTS[0] * 3)
    other = hybrid.tokenize(CHAT_PROMPTS[1] * 3)
    assert len(first) >= 64
    cache = PrefixCache(min_tokens=8)
    hybrid.reset()
    run(decoder, first, mode="plain", max_tokens=8)  # the head kept, not fed
    # The next turn goes on from all the cache holds (a recurrent state comes back whole).
    new = hybrid.tokenize(" And then?")
    follow_up = [*hybrid.tokens, *new]
    cache.prepare(hybrid, other)  # keeps `first`'s state, and its head's
    hybrid.reset()
    run(decoder, other, mode="plain", max_tokens=8)
    assert cache.prepare(hybrid, follow_up[:-1]) == len(follow_up) - len(new)
    restored = run(decoder, follow_up, mode="mtp", k=3, max_tokens=40)

    hybrid.reset()
    fresh = run(decoder, follow_up, mode="mtp", k=3, max_tokens=40)

    assert restored.tokens == fresh.tokens
    # The same drafts, kept as far: acceptance after a restore is a fresh chat's.
    assert [(r.draft, r.accepted) for r in restored.rounds] == [
        (r.draft, r.accepted) for r in fresh.rounds
    ]
    assert sum(r.drafted for r in restored.rounds) > 0


def test_a_head_drafts_after_a_kept_conversation_as_in_a_fresh_chat(
    hybrid: LlamaModel, tmp_path: Path
) -> None:
    hybrid.reset()
    decoder = SpeculativeDecoder(LoadedPair.of(hybrid))
    first = hybrid.tokenize(CHAT_PROMPTS[0] * 3)
    run(decoder, first, mode="plain", max_tokens=8)  # the head kept, not fed
    follow_up = [*hybrid.tokens, *hybrid.tokenize(" And then?")]
    store = KVStore(tmp_path)
    assert store.save(hybrid, "chat")  # the window keeps it, a restart or switch later
    hybrid.reset()
    assert store.restore(hybrid, "chat", follow_up[:-1]) > 0
    restored = run(decoder, follow_up, mode="mtp", k=3, max_tokens=40)

    hybrid.reset()
    fresh = run(decoder, follow_up, mode="mtp", k=3, max_tokens=40)
    assert restored.tokens == fresh.tokens
    assert [(r.draft, r.accepted) for r in restored.rounds] == [
        (r.draft, r.accepted) for r in fresh.rounds
    ]
    assert sum(r.drafted for r in restored.rounds) > 0


def test_a_head_never_adopts_a_state_another_head_kept(hybrid: LlamaModel, tmp_path: Path) -> None:
    from dataclasses import replace

    from specchat.engine.llamacpp.head_state import load_head_state, save_head_state

    hybrid.reset()
    head = DraftHead(hybrid)
    try:
        hybrid.decode(hybrid.tokenize(CHAT_PROMPTS[0]), logits="none")
        head.catch_up()
        state = head.state()
        assert state.source == head.source
        save_head_state(state, tmp_path / "kept.head0")
        loaded = load_head_state(tmp_path / "kept.head0")
        assert loaded is not None and loaded.source == head.source
        assert head.adopt(loaded)
        other = replace(state, source=f"eagle3|{tmp_path / 'other.gguf'}|1|2")
        assert not head.adopt(other)
    finally:
        head.close()
        hybrid.reset()
