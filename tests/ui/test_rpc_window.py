"""The window with its target spread over an rpc-server that is lost mid-answer: the error
names the server, what was written is stored, and "Reload here" loads the pair again on this
machine alone, after which it answers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from specchat import settings as cfg
from specchat.engine.llamacpp import rpc_devices
from specchat.tinymodels import TinyModels
from specchat.ui.window.main_window import MainWindow
from specchat.workers.generation import RoundUpdate
from tests.helpers.rpc_servers import rpc_servers
from tests.ui.conftest import load_tiny

pytestmark = pytest.mark.skipif(
    not rpc_devices.available(), reason="this llama.cpp has no RPC backend"
)

Maker = Callable[..., Any]


def test_a_lost_server_is_named_the_answer_kept_and_the_pair_reloads_here(
    qtbot: QtBot, make_window: Maker, tiny_models: TinyModels
) -> None:
    window: MainWindow = make_window()
    window.settings.set(cfg.MAX_TOKENS, 400)
    window.show()
    with rpc_servers(1) as (server,):
        window.controls.memory.set_rpc_servers(server.endpoint)
        load_tiny(qtbot, window, tiny_models)
        assert server.endpoint in window.controls.memory.rpc_note.text()
        window.controls.set_mode("plain")
        rounds: list[RoundUpdate] = []

        def kill_after_three(update: RoundUpdate) -> None:
            rounds.append(update)
            if len(rounds) == 3:
                server.kill()

        window.service.round_ready.connect(kill_after_three)
        with qtbot.waitSignal(window.error_shown, timeout=60_000) as blocker:
            window.send("Tell me a long story")
        window.service.round_ready.disconnect(kill_after_three)
    assert f"RPC server {server.endpoint} stopped answering" in blocker.args[0]
    conversation = window.store.conversations()[0]
    answer = window.store.messages(conversation.id)[-1]
    assert answer.role == "assistant" and answer.content
    assert window.banner.action_button.text() == "Reload here"
    with qtbot.waitSignal(window.model_loaded, timeout=60_000):
        window.banner.action_button.click()
    assert window.controls.memory.rpc_servers() == ""
    assert window.settings.get(cfg.RPC_SERVERS) == ""
    with qtbot.waitSignal(window.answer_done, timeout=60_000):
        window.send("And now?")
