"""The window's "Serve API" switch: off at start; on, a request from the `openai` client
streams into the API section; off again, the port is closed."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from typing import Any

import openai
import pytest
from pytestqt.qtbot import QtBot

from specchat.tinymodels import TinyModels
from specchat.workers.api_jobs import ApiRound
from tests.ui.conftest import load_tiny


def _port_open(host: str, port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(2)
        return probe.connect_ex((host, port)) == 0


def test_the_switch_serves_the_loaded_pair(
    qtbot: QtBot, make_window: Callable[..., Any], tiny_models: TinyModels
) -> None:
    window = make_window()
    panel = window.api_panel
    assert not panel.switch.isChecked()
    assert window.api.server is None
    load_tiny(qtbot, window, tiny_models)
    panel.port = 0  # any free port: 8080 may be taken on the test machine
    with qtbot.waitSignal(panel.serving, timeout=10_000):
        panel.switch.setChecked(True)
    address = window.api.server.address
    assert address.base_url in panel.address.text()
    assert _port_open(address.host, address.port)

    rounds: list[ApiRound] = []
    window.api.round_ready.connect(rounds.append)
    answer: list[str] = []

    def ask() -> None:
        client = openai.OpenAI(base_url=address.base_url, api_key="none", max_retries=0)
        stream = client.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "hello from an editor"}],
            temperature=0,
            max_tokens=40,
            stream=True,
            extra_body={"speculative": {"mode": "draft", "k": 3}},  # drafts: the gauge moves
        )
        answer.append("".join(c.choices[0].delta.content or "" for c in stream if c.choices))

    asking = threading.Thread(target=ask)
    asking.start()
    qtbot.waitUntil(lambda: bool(answer) and panel.requests.count() == 1, timeout=30_000)
    asking.join(10)
    assert len(rounds) > 1  # it streamed round by round into the section
    drafted = sum(r.result.drafted for r in rounds)
    accepted = sum(r.result.accepted for r in rounds)
    assert drafted > 0
    assert panel.gauge.value == pytest.approx(accepted / drafted)
    assert "hello from an editor" in panel.requests.item(0).text()
    qtbot.waitUntil(lambda: answer[0] in panel.view.toPlainText(), timeout=5_000)

    # Another pair loaded while serving: the server answers as that one.
    with qtbot.waitSignal(window.model_loaded, timeout=30_000):
        window.load_files(tiny_models.draft_far, None, label="another")
    listed = openai.OpenAI(base_url=address.base_url, api_key="none", max_retries=0).models.list()
    assert [m.id for m in listed.data] == ["tiny-draft-far"]

    with qtbot.waitSignal(panel.serving, timeout=10_000):
        panel.switch.setChecked(False)
    assert window.api.server is None
    assert not _port_open(address.host, address.port)


def test_the_switch_needs_a_loaded_pair(qtbot: QtBot, make_window: Callable[..., Any]) -> None:
    window = make_window()
    window.api_panel.port = 0
    window.api_panel.switch.setChecked(True)
    assert not window.api_panel.switch.isChecked()
    assert "load a model pair first" in window.api_panel.address.text()


def test_kept_api_chats_appear_in_the_conversation_list(
    qtbot: QtBot, make_window: Callable[..., Any], tiny_models: TinyModels
) -> None:
    from specchat import settings

    window = make_window()
    window.settings.set(settings.REMEMBER_API_CHATS, True)
    load_tiny(qtbot, window, tiny_models)
    window.api_panel.port = 0
    with qtbot.waitSignal(window.api_panel.serving, timeout=10_000):
        window.api_panel.switch.setChecked(True)
    address = window.api.server.address
    done: list[bool] = []

    def ask() -> None:
        client = openai.OpenAI(base_url=address.base_url, api_key="none", max_retries=0)
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "keep me"}], max_tokens=5
        )
        done.append(True)

    asking = threading.Thread(target=ask)
    asking.start()
    listed = window.conversation_list.list
    qtbot.waitUntil(
        lambda: any(listed.item(i).text() == "API: keep me" for i in range(listed.count())),
        timeout=30_000,
    )
    asking.join(10)
    assert done
    window.api_panel.switch.setChecked(False)
