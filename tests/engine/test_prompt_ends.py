"""A recurrent target's states kept near its prompts' ends (recurrent_state.PromptEnds), on
the tiny Qwen3.5 hybrid: a follow-up that parts from the last prompt within its answer (a
template that drops earlier thinking), an edit of an earlier turn and a chat restored from a
kept state read from the latest kept state before where they part, never from position 0,
and read it exactly as a fresh read would."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import llama_cpp
import numpy as np
import pytest

from specchat.engine.decoding.decoder import SpeculativeDecoder
from specchat.engine.drafting.base import LoadedPair
from specchat.engine.llamacpp.kv_store import KVStore
from specchat.engine.llamacpp.model import LlamaModel
from specchat.engine.llamacpp.prefix_cache import PrefixCache
from specchat.engine.llamacpp.recurrent_state import PROMPT_TAIL
from specchat.tinyarch import write_tiny_qwen35
from tests.helpers.engine import CHAT_PROMPTS, run


class ReadLog:
    """Where each of a model's decode calls started (a follower of its cache)."""

    def __init__(self) -> None:
        self.starts: list[int] = []

    def decoded(self, tokens: Sequence[int], start: int) -> None:
        self.starts.append(start)

    def dropped(self, n_keep: int) -> None:
        pass

    def state(self) -> None:
        return None

    def adopt(self, state: object) -> bool:
        return True

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_qwen35(tmp_path_factory.mktemp("ends") / "q.gguf", seed=1, mtp=False)


@pytest.fixture
def hybrid(path: Path) -> Iterator[LlamaModel]:
    with LlamaModel(path, n_ctx=2048, n_threads=1) as model:
        yield model


def _turn(model: LlamaModel, history: list[int], message: str) -> list[int]:
    """The next prompt: the history, a message and an opening the next turn drops (as
    Qwen3.5's template drops earlier thinking)."""
    return [*history, *model.tokenize(message), *model.tokenize("<think>")]


def _next_logits(model: LlamaModel, prompt: list[int]) -> np.ndarray:
    cached = model.sync(prompt[:-1])
    if cached < len(prompt) - 1:
        model.decode(prompt[cached:-1], logits="none")
    return model.decode(prompt[-1:], logits="last")[0]


def test_a_follow_up_reads_from_the_last_prompt_end(hybrid: LlamaModel, path: Path) -> None:
    decoder = SpeculativeDecoder(LoadedPair.of(hybrid))
    log = ReadLog()
    hybrid.follow(log)
    history: list[int] = []
    ends = []
    for turn in range(4):
        prompt = _turn(hybrid, history, CHAT_PROMPTS[turn % len(CHAT_PROMPTS)])
        log.starts.clear()
        answer = run(decoder, prompt, mode="plain", max_tokens=24)
        if turn:
            # Read from the state kept near the last prompt's end, not from the chat's start:
            # the answer after it, then the new message.
            assert min(log.starts) == ends[-1]
        ends.append(len(prompt) - 1 - PROMPT_TAIL)
        # The next turn holds the answer without its opening.
        history = [*prompt[: -len(hybrid.tokenize("<think>"))], *answer.tokens]
    # An edit of the second turn comes back to the state kept at the first prompt's end.
    log.starts.clear()
    edited = _turn(hybrid, history[: ends[1]], "Something else entirely")
    after = _next_logits(hybrid, edited)
    assert min(log.starts) > 0 and min(log.starts) <= ends[1]
    with LlamaModel(path, n_ctx=2048, n_threads=1) as fresh:
        np.testing.assert_allclose(after, _next_logits(fresh, edited), atol=1e-4)


def test_a_kept_state_keeps_its_prompt_ends(hybrid: LlamaModel, tmp_path: Path) -> None:
    decoder = SpeculativeDecoder(LoadedPair.of(hybrid))
    prompt = _turn(hybrid, [], CHAT_PROMPTS[0] * 3)
    answer = run(decoder, prompt, mode="plain", max_tokens=24)
    follow_up = _turn(hybrid, [*prompt[:-2], *answer.tokens[:-6]], "And then?")
    store = KVStore(tmp_path)
    assert store.save(hybrid, "chat")
    cache = PrefixCache(min_tokens=8)
    cache.prepare(hybrid, follow_up)  # kept in memory too
    for restore in (
        lambda: store.restore(hybrid, "chat", follow_up),
        lambda: cache.prepare(hybrid, follow_up),
    ):
        hybrid.reset()
        log = ReadLog()
        hybrid.follow(log)
        restore()
        after = _next_logits(hybrid, follow_up)
        hybrid.unfollow(log)
        # Back to the state near the prompt's end, then only the rest read.
        assert log.starts and min(log.starts) >= len(prompt) - 1 - PROMPT_TAIL
        with LlamaModel(hybrid.path, n_ctx=2048, n_threads=1) as fresh:
            np.testing.assert_allclose(after, _next_logits(fresh, follow_up), atol=1e-4)


def test_the_state_dropped_is_the_one_whose_loss_widens_the_worst_re_read_least() -> None:
    from specchat.engine.llamacpp.recurrent_state import _least_useful

    # Gaps after dropping each of the first two: 40 - 0 and 50 - 2; the last two stay.
    assert _least_useful([2, 40, 50, 60]) == 0
    assert _least_useful([20, 30, 35, 110, 120]) == 1  # 35 - 20 is the narrowest
    assert _least_useful([5, 9]) == 0


def test_two_chats_taking_turns_keep_states_spread_over_each_chat(hybrid: LlamaModel) -> None:
    """Through the prefix cache, as two API clients taking turns: each chat's kept state
    carries prompt ends spread over the chat, so an edit of its second turn, after many
    turns of both, reads from a state before it — not from position 0."""
    decoder = SpeculativeDecoder(LoadedPair.of(hybrid))
    cache = PrefixCache(min_tokens=8)
    histories: dict[str, list[int]] = {"a": [], "b": []}
    ends: dict[str, list[int]] = {"a": [], "b": []}
    for turn in range(6):
        for chat in ("a", "b"):
            prompt = _turn(hybrid, histories[chat], f"{chat} {CHAT_PROMPTS[turn % 3]}")
            cache.prepare(hybrid, prompt)
            answer = run(decoder, prompt, mode="plain", max_tokens=12)
            ends[chat].append(len(prompt) - 1 - PROMPT_TAIL)
            histories[chat] = [*prompt[: -len(hybrid.tokenize("<think>"))], *answer.tokens]
            if turn == 0:
                # Room for three ends a kept state (the last two and one earlier), and for
                # three kept states: earlier turns' own states are evicted.
                one_end = len(hybrid.prompt_ends.export(last=1)[0][1])
                state = int(llama_cpp.llama_state_seq_get_size(hybrid.context, 0))
                cache.ends_bytes = 3 * one_end
                cache.max_bytes = 3 * (state + 64 * 1024 + cache.ends_bytes)
    cache.prepare(hybrid, _turn(hybrid, [], "a new chat"))  # keeps chat b's state
    kept = {len(s.tokens): [p for p, _ in s.ends] for s in cache._snapshots}
    assert len(kept) <= 3 and all(len(positions) <= 3 for positions in kept.values())
    assert not any(n <= ends["a"][2] for n in kept), kept  # no state of a's early turns
    log = ReadLog()
    hybrid.follow(log)
    edited = _turn(hybrid, histories["a"][: ends["a"][1] + 2], "Something else entirely")
    held = cache.prepare(hybrid, edited)
    after = _next_logits(hybrid, edited)
    hybrid.unfollow(log)
    assert held > 0 and log.starts and 0 < min(log.starts) <= ends["a"][1], kept
    with LlamaModel(hybrid.path, n_ctx=2048, n_threads=1) as fresh:
        np.testing.assert_allclose(after, _next_logits(fresh, edited), atol=1e-4)
