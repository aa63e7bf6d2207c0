"""The generation worker with its target spread over an rpc-server: a server that cannot be
reached fails the load by name, one lost mid-answer fails the answer by name after the rounds
written so far, and the pair then reloads on this machine alone."""

from __future__ import annotations

import pytest
from pytestqt.qtbot import QtBot

from specchat.engine.llamacpp import rpc_devices
from specchat.engine.templates.chat_template import ChatMessage
from specchat.tinymodels import TinyModels
from specchat.workers.generation import (
    Controls,
    Failure,
    GenerateRequest,
    GenerationWorker,
    LoadRequest,
    RoundUpdate,
)
from tests.helpers.rpc_servers import free_port, rpc_servers

pytestmark = pytest.mark.skipif(
    not rpc_devices.available(), reason="this llama.cpp has no RPC backend"
)

QUESTION = (ChatMessage("user", "Tell me about speculative decoding."),)


def _load(tiny: TinyModels, load_id: int, servers: str) -> LoadRequest:
    return LoadRequest(
        load_id,
        target=tiny.target,
        draft=tiny.draft_close,
        label="tiny",
        n_ctx=2048,
        calibrate=False,
        rpc_servers=servers,
    )


def test_an_unreachable_server_fails_the_load_by_name(
    qtbot: QtBot, tiny_models: TinyModels
) -> None:
    worker = GenerationWorker(n_threads=1)
    endpoint = f"127.0.0.1:{free_port()}"
    with qtbot.waitSignal(worker.failed, timeout=30_000) as blocker:
        worker._on_load_requested(_load(tiny_models, 1, endpoint))
    failure: Failure = blocker.args[0]
    assert f"RPC server {endpoint}: cannot be reached" in failure.message
    assert failure.message.startswith("The model could not be loaded")


def test_a_server_lost_mid_answer_fails_it_by_name_after_what_was_written(
    qtbot: QtBot, tiny_models: TinyModels
) -> None:
    worker = GenerationWorker(n_threads=1)
    rounds: list[RoundUpdate] = []
    with rpc_servers(1) as (server,):
        with qtbot.waitSignal(worker.loaded, timeout=60_000):
            worker._on_load_requested(_load(tiny_models, 1, server.endpoint))

        def kill_after_two(update: RoundUpdate) -> None:
            rounds.append(update)
            if len(rounds) == 2:
                server.kill()

        worker.round_ready.connect(kill_after_two)
        with qtbot.waitSignal(worker.failed, timeout=60_000) as blocker:
            worker._on_generate_requested(
                GenerateRequest(3, QUESTION, max_tokens=200, controls=Controls("plain", 0))
            )
        failure: Failure = blocker.args[0]
        assert failure.request_id == 3
        assert f"RPC server {server.endpoint} stopped answering" in failure.message
        assert len(rounds) >= 2 and all(r.request_id == 3 for r in rounds)
    with qtbot.waitSignal(worker.loaded, timeout=60_000):
        worker._on_load_requested(_load(tiny_models, 2, ""))
    worker.round_ready.disconnect(kill_after_two)
    with qtbot.waitSignal(worker.finished, timeout=60_000):
        worker._on_generate_requested(
            GenerateRequest(4, QUESTION, max_tokens=16, controls=Controls("plain", 0))
        )


def test_a_reload_over_the_same_server_lets_the_old_pair_go_first(
    qtbot: QtBot, tiny_models: TinyModels
) -> None:
    """A server serves one client at a time: the second load would wait on the first pair's
    connection, so the worker releases that pair before it loads over the server again."""
    worker = GenerationWorker(n_threads=1)
    with rpc_servers(1) as (server,):
        for load_id in (1, 2):
            with qtbot.waitSignal(worker.loaded, timeout=60_000):
                worker._on_load_requested(_load(tiny_models, load_id, server.endpoint))
        with qtbot.waitSignal(worker.finished, timeout=60_000):
            worker._on_generate_requested(
                GenerateRequest(5, QUESTION, max_tokens=16, controls=Controls("plain", 0))
            )
        worker._release_engine()
