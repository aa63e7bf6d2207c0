"""A conversation's KV state kept on disk: restored, it answers exactly as the live cache did;
reused only for the prompt's exact prefix; bounded in size; prompt reading in chunks."""

from __future__ import annotations

from pathlib import Path

from specchat.engine.llamacpp.kv_store import KVStore
from specchat.engine.llamacpp.prompt_reading import PromptRate, read_prompt
from specchat.engine.session import ChatEngine
from specchat.engine.types import Controls, GenerationRequest
from specchat.tinymodels import TinyModels


def _load(tiny: TinyModels) -> ChatEngine:
    return ChatEngine.load(tiny.target, None, n_ctx=1024, n_threads=1)


def _answer(engine: ChatEngine, prompt: list[int], n: int = 16) -> tuple[list[int], int]:
    """Greedy token ids, and how many prompt tokens had to be evaluated."""
    ids: list[int] = []
    evaluated = -1
    for result in engine.generate(GenerationRequest(tuple(prompt), n, Controls("plain", 0))):
        ids += [e.token for e in result.events]
        evaluated = result.stats.prompt_tokens
    return ids, evaluated


def _prompt(engine: ChatEngine, text: str) -> list[int]:
    return engine.target.tokenize(text, add_special=False, parse_special=False)


def test_a_restored_state_answers_exactly_as_the_live_cache(
    tiny_models: TinyModels, tmp_path: Path
) -> None:
    store = KVStore(tmp_path / "kv")
    first = _load(tiny_models)
    prompt = _prompt(first, "The quick brown fox jumps over the lazy dog. " * 12)
    answer, _ = _answer(first, prompt)
    follow_up = prompt + answer + _prompt(first, " And then what happened next?")
    assert store.save(first.target, "7") > 0
    live, live_evaluated = _answer(first, follow_up)  # the cache kept in memory
    first.close()

    restarted = _load(tiny_models)  # a new process: nothing cached
    restored = store.restore(restarted.target, "7", follow_up[:-1])
    assert restored >= len(prompt)
    again, evaluated = _answer(restarted, follow_up)
    assert again == live
    assert evaluated == live_evaluated == len(follow_up) - 1 - restored
    fresh = _load(tiny_models)
    reread, reread_evaluated = _answer(fresh, follow_up)
    assert reread_evaluated == len(follow_up) - 1
    assert reread == again  # the same as evaluating the whole conversation again
    for engine in (restarted, fresh):
        engine.close()


def test_only_the_exact_prefix_is_reused(tiny_models: TinyModels, tmp_path: Path) -> None:
    store = KVStore(tmp_path / "kv")
    engine = _load(tiny_models)
    prompt = _prompt(engine, "One two three four five six seven eight nine ten. " * 10)
    _answer(engine, prompt, n=4)
    store.save(engine.target, "c")
    engine.target.reset()
    other = _prompt(engine, "Something else entirely, nothing in common here. " * 10)
    assert store.restore(engine.target, "c", other) == 0
    assert engine.target.tokens == []
    edited = prompt[:80] + other[:40]  # the same start, then a different text
    assert store.restore(engine.target, "c", edited) == 80
    assert engine.target.tokens == edited[:80]
    assert store.restore(engine.target, "another conversation", prompt) == 0
    engine.close()


def test_total_size_is_bounded(tiny_models: TinyModels, tmp_path: Path) -> None:
    engine = _load(tiny_models)
    prompt = _prompt(engine, "Bounded storage keeps the recent ones. " * 12)
    engine.target.sync([])
    engine.target.decode(prompt, logits="none")
    one = KVStore(tmp_path / "probe").save(engine.target, "probe")
    store = KVStore(tmp_path / "kv", max_bytes=int(one * 2.5))
    for conversation in ("a", "b", "c", "d"):
        store.save(engine.target, conversation)
    assert store.total_bytes() <= store.max_bytes
    names = {f.name.split("-", 1)[1] for f in store.directory.glob("*.kv")}
    assert names == {"c.kv", "d.kv"}  # the least recently used went first
    engine.close()


def test_prompt_is_read_in_chunks_with_an_estimate(tiny_models: TinyModels) -> None:
    engine = _load(tiny_models)
    prompt = _prompt(engine, "Reading a long paste takes a while on a CPU. " * 20)
    rate = PromptRate()
    steps = list(read_prompt(engine.target, prompt, rate=rate, chunk=32))
    assert steps[0].done == 0 and steps[0].eta_s is None
    assert [s.done for s in steps[1:]] == [min(len(prompt), 32 * i) for i in range(1, len(steps))]
    assert steps[-1].done == steps[-1].total == len(prompt)
    assert all(s.eta_s is not None for s in steps[1:]) and steps[-1].eta_s == 0
    assert engine.target.tokens == prompt
    # Stopped between chunks, the cache holds a prefix the next reading continues from.
    engine.target.reset()
    reading = read_prompt(engine.target, prompt, rate=rate, chunk=32)
    next(reading), next(reading)
    reading.close()
    assert engine.target.tokens == prompt[:32]
    rest = list(read_prompt(engine.target, prompt, rate=rate, chunk=32))
    assert rest[0].total == len(prompt) - 32 and rest[0].eta_s is not None
    # Nothing left to read: reported done at once.
    assert [(r.done, r.total) for r in read_prompt(engine.target, prompt, rate=rate)] == [(0, 0)]
    engine.close()
