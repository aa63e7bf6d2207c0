"""The window's "Serve API" switch: off at start; on, a request from the `openai` client
streams into the API section (tool-call requests too); off again, the port is closed. The
address, port and key are settings, with the command line's rule: another address than this
machine's needs a key."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
import pytest
from PySide6.QtCore import QTimer
from pytestqt.qtbot import QtBot

from specchat import settings as cfg
from specchat.host.events import ApiQueue, ApiRound
from specchat.tinymodels import TinyModels
from tests.helpers.api_server import request
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
    assert panel.details.isHidden()  # off: the title row and one line
    load_tiny(qtbot, window, tiny_models)
    window.settings.set(cfg.API_PORT, 0)  # any free port: 8080 may be taken here
    with qtbot.waitSignal(panel.serving, timeout=10_000):
        panel.switch.setChecked(True)
    address = window.api.server.address
    assert address.host == "127.0.0.1"
    assert address.base_url in panel.address.text()
    assert _port_open(address.host, address.port)
    assert not panel.details.isHidden()

    rounds: list[ApiRound] = []
    queues: list[ApiQueue] = []
    window.api.events.round_ready.connect(rounds.append)
    window.api.events.queue_changed.connect(queues.append)
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
    assert panel.gauge.caption().startswith("all ")  # the marker: every request, not a chat
    assert "hello from an editor" in panel.requests.item(0).text()
    qtbot.waitUntil(lambda: answer[0] in panel.view.toPlainText(), timeout=5_000)
    # The queue as it was: the request answered, then nothing waiting and nothing answered.
    assert ApiQueue(0, True) in queues
    qtbot.waitUntil(lambda: panel.queue.text() == "Waiting: 0", timeout=5_000)
    assert queues[-1] == ApiQueue(0, False)

    # Another pair loaded while serving: the server answers as that one.
    with qtbot.waitSignal(window.model_loaded, timeout=30_000):
        window.load_files(tiny_models.draft_far, None, label="another")
    listed = openai.OpenAI(base_url=address.base_url, api_key="none", max_retries=0).models.list()
    assert [m.id for m in listed.data] == ["tiny-draft-far"]

    with qtbot.waitSignal(panel.serving, timeout=10_000):
        panel.switch.setChecked(False)
    assert window.api.server is None
    assert not _port_open(address.host, address.port)
    assert panel.details.isHidden()


def test_the_switch_needs_a_loaded_pair(qtbot: QtBot, make_window: Callable[..., Any]) -> None:
    window = make_window()
    window.settings.set(cfg.API_PORT, 0)
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
    window.settings.set(cfg.API_PORT, 0)
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


def test_another_address_without_a_key_is_refused_in_the_panel(
    qtbot: QtBot, make_window: Callable[..., Any], tiny_models: TinyModels
) -> None:
    window = make_window()
    load_tiny(qtbot, window, tiny_models)
    window.settings.set(cfg.API_HOST, "0.0.0.0")
    window.settings.set(cfg.API_PORT, 0)
    panel = window.api_panel
    with qtbot.waitSignal(panel.refused, timeout=5_000):
        panel.switch.setChecked(True)
    assert not panel.switch.isChecked()
    assert window.api.server is None
    said = panel.address.text()
    assert said.startswith("Not serving: binding 0.0.0.0 lets other machines use the models")
    assert "API key in File → Settings" in said
    assert panel.details.isHidden()
    # The whole reason is shown, however many lines it wraps to in the column.
    assert panel.address.height() >= panel.address.heightForWidth(panel.address.width())


def test_an_emptied_address_serves_this_machine_only(
    qtbot: QtBot, make_window: Callable[..., Any], tiny_models: TinyModels
) -> None:
    window = make_window()
    load_tiny(qtbot, window, tiny_models)
    window.settings.set(cfg.API_HOST, "  ")
    window.settings.set(cfg.API_PORT, 0)
    with qtbot.waitSignal(window.api_panel.serving, timeout=10_000):
        window.api_panel.switch.setChecked(True)
    assert window.api.server.address.host == "127.0.0.1"
    with qtbot.waitSignal(window.api_panel.serving, timeout=10_000):
        window.api_panel.switch.setChecked(False)


def test_the_address_and_key_come_from_the_settings(
    qtbot: QtBot, make_window: Callable[..., Any], tiny_models: TinyModels
) -> None:
    window = make_window()
    load_tiny(qtbot, window, tiny_models)
    # Another loopback address than the default (no other machine can reach it), and a key.
    window.settings.set(cfg.API_HOST, "127.0.0.2")
    window.settings.set(cfg.API_PORT, 0)
    window.settings.set(cfg.API_KEY, "sesame")
    panel = window.api_panel
    with qtbot.waitSignal(panel.serving, timeout=10_000):
        panel.switch.setChecked(True)
    address = window.api.server.address
    assert address.host == "127.0.0.2"
    assert "key required" in panel.address.text()
    assert request(address, "GET", "/v1/models").status == 401
    keyed = request(address, "GET", "/v1/models", headers={"Authorization": "Bearer sesame"})
    assert keyed.status == 200
    with qtbot.waitSignal(panel.serving, timeout=10_000):
        panel.switch.setChecked(False)
    assert not _port_open(address.host, address.port)


def test_the_queue_reaches_the_window_while_a_job_holds_the_worker(
    qtbot: QtBot, make_window: Callable[..., Any], tiny_models: TinyModels
) -> None:
    # A request arriving while the worker's thread answers another is reported from the
    # server's thread: the window must hear it then, not once the worker is free again
    # (it would then arrive after newer reports, and the panel would show a stale queue).
    window = make_window()
    load_tiny(qtbot, window, tiny_models)
    window.settings.set(cfg.API_PORT, 0)
    with qtbot.waitSignal(window.api_panel.serving, timeout=10_000):
        window.api_panel.switch.setChecked(True)
    events = window.api.events
    gate = threading.Event()
    held = threading.Event()

    def hold() -> None:  # on the worker's thread, as a job being answered would
        held.set()
        gate.wait(10)

    QTimer.singleShot(0, window.service.worker, hold)
    assert held.wait(10)
    try:
        with qtbot.waitSignal(window.api.events.queue_changed, timeout=3_000) as heard:
            threading.Thread(target=lambda: events.queue_changed.emit(ApiQueue(3, True))).start()
        assert heard.args == [ApiQueue(3, True)]
        assert not gate.is_set()  # heard while the worker was still held
    finally:
        gate.set()
    time.sleep(0.05)
    window.api_panel.switch.setChecked(False)


def test_tool_call_requests_show_in_the_api_section_like_any_other(
    qtbot: QtBot, make_window: Callable[..., Any], tools_target: Path, tiny_models: TinyModels
) -> None:
    window = make_window()
    with qtbot.waitSignal(window.model_loaded, timeout=30_000):
        window.load_files(tools_target, tiny_models.draft_close, label="tools")
    window.settings.set(cfg.API_PORT, 0)
    panel = window.api_panel
    with qtbot.waitSignal(panel.serving, timeout=10_000):
        panel.switch.setChecked(True)
    address = window.api.server.address
    tool = {"type": "function", "function": {"name": "get_time", "parameters": {}}}
    named = {"type": "function", "function": {"name": "get_time"}}
    done: list[bool] = []

    def agent() -> None:
        client = openai.OpenAI(base_url=address.base_url, api_key="none", max_retries=0)
        asked: list[Any] = [{"role": "user", "content": "what time is it?"}]
        first = client.chat.completions.create(
            model="m", messages=asked, tools=[tool], tool_choice=named, max_tokens=6
        )
        said = first.choices[0].message
        (call,) = said.tool_calls or []
        result = {"role": "tool", "tool_call_id": call.id, "name": "get_time", "content": "14:05"}
        chat = [*asked, said.model_dump(exclude_none=True), result]
        client.chat.completions.create(model="m", messages=chat, tools=[tool], max_tokens=6)
        done.append(True)

    asking = threading.Thread(target=agent)
    asking.start()
    qtbot.waitUntil(lambda: bool(done) and panel.requests.count() == 2, timeout=30_000)
    asking.join(10)
    called, answered = panel.requests.item(0).text(), panel.requests.item(1).text()
    assert "what time is it?" in called and "called get_time" in called
    assert "[get_time result] 14:05" in answered
    qtbot.waitUntil(lambda: "[get_time result] 14:05" in panel.view.toPlainText(), timeout=5_000)
    with qtbot.waitSignal(panel.serving, timeout=10_000):
        panel.switch.setChecked(False)
