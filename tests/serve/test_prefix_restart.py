"""The API's prefix cache kept on disk (PrefixCache with a KVStore): a chat's follow-up after
the server stopped and started again reads only its new tokens, on the tiny pair and on the
tiny Qwen3.5 hybrid with its MTP head (which cannot roll back by cutting its cache); a file
that does not read whole, another model's file, an unwritable directory and the byte budget
never cost an answer. Counted in the prompt tokens the server says it read (`prompt_n`)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from specchat import paths
from specchat.engine.llamacpp.kv_store import KVStore
from specchat.engine.llamacpp.prefix_cache import API_KV_DIR, PrefixCache
from specchat.engine.llamacpp.recurrent_state import PROMPT_TAIL
from specchat.tinyarch import write_tiny_qwen35
from specchat.tinymodels import TinyModels
from tests.engine.test_prompt_ends import ReadLog
from tests.helpers.api_server import engine_thread, running_server, server_log
from tests.serve.test_openai_client import client
from tests.serve.test_prefix_reuse import _turns

SYSTEM = "You review code. Here is the file:\n" + "def f(x):\n    return x + 1\n" * 12
OTHER = "You review code. Here is the file:\n" + "def g(y):\n    return y * 2\n" * 12


def _ask(
    target: Path,
    draft: Path | None,
    store: KVStore,
    messages: list[Any],
    *,
    mode: str = "plain",
    log: ReadLog | None = None,
) -> dict[str, Any]:
    """One request to a server started for it (and stopped after it): its usage and timings;
    `log` follows the target's cache meanwhile (every row it reads)."""
    with running_server(target, draft, prefixes=PrefixCache(store=store)) as server:
        if log is not None:
            engine = engine_thread(server).engine
            assert engine is not None
            engine.target.follow(log)
        reply = client(server).chat.completions.create(
            model="m",
            messages=messages,
            temperature=0,
            max_tokens=4,
            extra_body={"speculative": {"mode": mode}},
        )
    assert reply.usage is not None
    extra: dict[str, Any] = reply.model_extra or {}
    return {"prompt_tokens": reply.usage.prompt_tokens, **extra["timings"]}


def _reads_only_new_tokens(first: dict[str, Any], follow_up: dict[str, Any]) -> None:
    assert follow_up["cache_n"] >= first["prompt_tokens"] - 1
    assert follow_up["prompt_n"] <= follow_up["prompt_tokens"] - first["prompt_tokens"] + 1


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path: Path = write_tiny_qwen35(tmp_path_factory.mktemp("restart") / "q.gguf", mtp=True)
    return path


@pytest.fixture
def store(tmp_path: Path) -> Iterator[KVStore]:
    yield KVStore(tmp_path / "api-kv")


@pytest.mark.parametrize("mode", ["plain", "draft"])
def test_a_follow_up_after_a_restart_reads_only_its_new_tokens(
    tiny_models: TinyModels, store: KVStore, mode: str
) -> None:
    target, draft = tiny_models.target, tiny_models.draft_close
    first = _ask(target, draft, store, _turns(SYSTEM, 0), mode=mode)
    assert first["cache_n"] == 0
    # Written after the answer: the target's state, and the draft model's where it drafted
    # (a plain answer leaves it behind: nothing of it worth writing).
    assert len(list(store.directory.glob("*.kv"))) == (2 if mode == "draft" else 1)
    follow_up = _ask(target, draft, store, _turns(SYSTEM, 1), mode=mode)
    _reads_only_new_tokens(first, follow_up)


@pytest.mark.parametrize("mode", ["plain", "mtp"])
def test_a_hybrid_follow_up_after_a_restart_reads_only_its_new_tokens(
    hybrid: Path, store: KVStore, mode: str
) -> None:
    first = _ask(hybrid, None, store, _turns(SYSTEM, 0), mode=mode)
    assert first["cache_n"] == 0
    log = ReadLog()
    follow_up = _ask(hybrid, None, store, _turns(SYSTEM, 1), mode=mode, log=log)
    _reads_only_new_tokens(first, follow_up)
    # Counted in rows too (a rollback's re-read is not in prompt_n): it reads from the state
    # kept at the first prompt's end, never from position 0.
    assert min(log.starts) >= first["prompt_tokens"] - PROMPT_TAIL - 1


def test_a_corrupt_or_truncated_state_is_read_again_with_a_log_line(
    tiny_models: TinyModels, store: KVStore
) -> None:
    target = tiny_models.target
    _ask(target, None, store, _turns(SYSTEM, 0))
    for kept in store.directory.glob("*.kv"):
        data = kept.read_bytes()
        kept.write_bytes(data[: len(data) // 2])  # truncated
    with (
        running_server(target, None, prefixes=PrefixCache(store=store)) as server,
        server_log() as records,
    ):
        reply = client(server).chat.completions.create(
            model="m", messages=_turns(SYSTEM, 1), temperature=0, max_tokens=4
        )
    assert reply.choices[0].message.content
    timings = (reply.model_extra or {})["timings"]
    assert timings["cache_n"] == 0  # read again, whole
    assert any("not whole" in r.getMessage() for r in records)
    # The answer's own state replaced it: the next restart reads only what is new.
    first = {"prompt_tokens": reply.usage.prompt_tokens if reply.usage else 0}
    _reads_only_new_tokens(first, _ask(target, None, store, _turns(SYSTEM, 2)))


def test_a_state_of_garbage_is_read_again(tiny_models: TinyModels, store: KVStore) -> None:
    target = tiny_models.target
    _ask(target, None, store, _turns(SYSTEM, 0))
    for kept in store.directory.glob("*.kv"):
        # Its header and tokens as written, what follows them changed.
        data = bytearray(kept.read_bytes())
        data[-len(data) // 2 :] = b"\xff" * (len(data) - len(data) // 2)
        kept.write_bytes(bytes(data))
    follow_up = _ask(target, None, store, _turns(SYSTEM, 1))
    assert follow_up["cache_n"] == 0


def test_another_models_state_is_never_loaded(
    tiny_models: TinyModels, hybrid: Path, store: KVStore, caplog: pytest.LogCaptureFixture
) -> None:
    _ask(tiny_models.target, None, store, _turns(SYSTEM, 0))
    written = sorted(store.directory.iterdir())
    follow_up = _ask(hybrid, None, store, _turns(SYSTEM, 1))
    assert follow_up["cache_n"] == 0
    # Even under the other model's name: llama.cpp refuses it, and the prompt is read.
    _ask(hybrid, None, store, _turns(SYSTEM, 1))
    own = {f.name.split("-", 1)[0] for f in store.directory.iterdir()} - {
        f.name.split("-", 1)[0] for f in written
    }
    assert len(own) == 1
    hybrid_stem = own.pop()
    for file in store.directory.glob(f"{hybrid_stem}-*"):
        file.unlink()
    for file in written:
        prefix = file.name.split("-", 1)[0]
        file.rename(file.with_name(file.name.replace(prefix, hybrid_stem, 1)))
    caplog.set_level(logging.INFO)
    follow_up = _ask(hybrid, None, store, _turns(SYSTEM, 1))
    assert follow_up["cache_n"] == 0
    assert any("would not load" in r.getMessage() for r in caplog.records)


def test_an_unwritable_store_costs_no_answer(
    tiny_models: TinyModels, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    caplog.set_level(logging.WARNING)
    first = _ask(tiny_models.target, None, KVStore(blocked / "api-kv"), _turns(SYSTEM, 0))
    assert first["prompt_n"] == first["prompt_tokens"]
    assert any("could not be kept" in r.getMessage() for r in caplog.records)


def test_the_byte_budget_evicts_the_least_recently_used_chat(
    tiny_models: TinyModels, tmp_path: Path
) -> None:
    target = tiny_models.target
    probe = KVStore(tmp_path / "probe")
    _ask(target, None, probe, _turns(SYSTEM, 0))
    one_chat = probe.total_bytes()
    store = KVStore(tmp_path / "api-kv", max_bytes=one_chat * 3 // 2)
    first_a = _ask(target, None, store, _turns(SYSTEM, 0))
    _ask(target, None, store, _turns(OTHER, 0))
    assert store.total_bytes() <= store.max_bytes
    assert len(list(store.directory.glob("*.kv"))) == 1
    again_a = _ask(target, None, store, _turns(SYSTEM, 1))
    assert again_a["cache_n"] < 16  # evicted: read almost whole
    assert first_a["cache_n"] == 0
    follow_b = _ask(target, None, store, _turns(OTHER, 1))
    assert follow_b["prompt_n"] == follow_b["prompt_tokens"]  # B was evicted by A's turn


def test_the_served_cache_keeps_its_chats_under_the_cache_directory() -> None:
    store = PrefixCache.on_disk().store
    assert store is not None
    assert store.directory == paths.cache_dir() / API_KV_DIR
