"""`specchat serve` over raw HTTP: malformed and oversized bodies, keys, disconnects, a full
queue, a failing engine, CORS."""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

import pytest

from specchat.cli import main
from specchat.engine.types import StopReason
from specchat.host.jobs import Finished, Job
from specchat.serve.guard import MAX_BODY_BYTES, ServeOptions, check_options
from specchat.serve.server import ApiServer
from specchat.tinymodels import TinyModels
from tests.helpers.api_server import engine_thread, request, running_server

CHAT = "/v1/chat/completions"
BODY: dict[str, Any] = {
    "model": "m",
    "messages": [{"role": "user", "content": "hello"}],
    "temperature": 0,
    "max_tokens": 8,
}


def _error(reply: Any) -> dict[str, Any]:
    body = reply.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


def test_health_and_unknown_paths(server: ApiServer) -> None:
    assert server.address is not None
    health = request(server.address, "GET", "/health")
    assert health.status == 200 and health.json()["status"] == "ok"
    missing = request(server.address, "GET", "/v1/nothing")
    assert missing.status == 404 and _error(missing)["message"]


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"",
        b"[1, 2]",
        b"\xff\xfe",
        b"[" * 100_000 + b"]" * 100_000,
        b'{"max_tokens": ' + b"1" * 5000 + b"}",  # past Python's cap on an integer's digits
    ],
)
def test_malformed_bodies_are_400_in_openai_shape(server: ApiServer, body: bytes) -> None:
    assert server.address is not None
    reply = request(server.address, "POST", CHAT, body)
    assert reply.status == 400
    assert _error(reply)["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    ("change", "param"),
    [
        ({"messages": "hello"}, "messages"),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
            "messages[0].content[0]",
        ),
        ({"max_tokens": "8"}, "max_tokens"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"stream": "yes"}, "stream"),
        ({"stop": [1, 2]}, "stop"),
        ({"top_p": 3}, "top_p"),
        ({"temperature": True}, "temperature"),
    ],
)
def test_wrong_types_are_400_naming_the_field(
    server: ApiServer, change: dict[str, Any], param: str
) -> None:
    assert server.address is not None
    reply = request(server.address, "POST", CHAT, {**BODY, **change})
    assert reply.status == 400
    assert _error(reply)["param"] == param


def test_text_parts_are_joined(server: ApiServer) -> None:
    assert server.address is not None
    parts = [{"type": "text", "text": "hel"}, {"type": "text", "text": "lo"}]
    joined = request(server.address, "POST", CHAT, BODY).json()
    split = request(
        server.address, "POST", CHAT, {**BODY, "messages": [{"role": "user", "content": parts}]}
    ).json()
    assert split["choices"][0]["message"] == joined["choices"][0]["message"]


def test_oversized_bodies_are_413(tiny_models: TinyModels) -> None:
    assert MAX_BODY_BYTES == 8 << 20
    with running_server(tiny_models.target, None, max_body_bytes=4096) as server:
        assert server.address is not None
        big = {**BODY, "messages": [{"role": "user", "content": "x" * 5000}]}
        declared = request(server.address, "POST", CHAT, big)
        assert declared.status == 413 and _error(declared)["code"] == "request_too_large"
        # Without a Content-Length (chunked), the limit holds as the body is read.
        chunked = _chunked_post(server, json.dumps(big).encode())
        assert chunked.startswith(b"HTTP/1.1 413")
        assert request(server.address, "POST", CHAT, BODY).status == 200


def _chunked_post(server: ApiServer, data: bytes) -> bytes:
    assert server.address is not None
    with socket.create_connection((server.address.host, server.address.port), timeout=30) as s:
        s.sendall(
            f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Transfer-Encoding: chunked\r\n\r\n".encode()
        )
        for start in range(0, len(data), 1000):
            piece = data[start : start + 1000]
            s.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        s.sendall(b"0\r\n\r\n")
        return s.recv(65536)


def test_a_key_is_required_when_given(tiny_models: TinyModels) -> None:
    with running_server(tiny_models.target, None, api_key="s3cret") as server:
        assert server.address is not None
        missing = request(server.address, "POST", CHAT, BODY)
        wrong = request(server.address, "GET", "/v1/models", headers={"Authorization": "Bearer x"})
        right = request(
            server.address, "POST", CHAT, BODY, headers={"Authorization": "Bearer s3cret"}
        )
        assert missing.status == 401 and _error(missing)["code"] == "invalid_api_key"
        assert wrong.status == 401
        assert right.status == 200
        assert request(server.address, "GET", "/health").status == 200


def test_other_addresses_need_a_key(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="--api-key"):
        check_options(ServeOptions(host="0.0.0.0"))
    check_options(ServeOptions(host="0.0.0.0", api_key="k"))
    check_options(ServeOptions(host="::1"))
    assert main(["serve", "--host", "0.0.0.0", "--api-key", ""]) == 2
    err = capsys.readouterr().err
    assert "--api-key" in err and "Traceback" not in err


def test_no_cors_unless_asked(server: ApiServer, tiny_models: TinyModels) -> None:
    assert server.address is not None
    origin = {"Origin": "http://example.test"}
    plain = request(server.address, "GET", "/v1/models", headers=origin)
    assert "access-control-allow-origin" not in plain.headers
    with running_server(tiny_models.target, None, cors=("http://example.test",)) as allowing:
        assert allowing.address is not None
        reply = request(allowing.address, "GET", "/v1/models", headers=origin)
        assert reply.headers["access-control-allow-origin"] == "http://example.test"


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_a_client_that_goes_away_cancels_its_answer_within_a_round(
    server: ApiServer, stream: bool
) -> None:
    assert server.address is not None
    ended: list[object] = []
    done = threading.Event()

    def on_job(job: Job, last: object) -> None:
        if last is not None:
            ended.append(last)
            done.set()

    engine_thread(server).runner.on_job = on_job
    try:
        body = json.dumps({**BODY, "max_tokens": 900, "stream": stream}).encode()
        with socket.create_connection((server.address.host, server.address.port)) as s:
            s.sendall(
                f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            if stream:
                assert s.recv(4096).startswith(b"HTTP/1.1 200")
            else:
                deadline = time.monotonic() + 30
                while not engine_thread(server).running and time.monotonic() < deadline:
                    time.sleep(0.001)
        assert done.wait(30)
    finally:
        engine_thread(server).runner.on_job = None
    last = ended[0]
    assert isinstance(last, Finished)
    assert last.summary.stop is StopReason.CANCELLED
    assert last.summary.stats.emitted < 900


def test_a_full_queue_is_503_with_retry_after(tiny_models: TinyModels) -> None:
    hold = threading.Event()
    started = threading.Event()

    def on_job(job: Job, last: object) -> None:
        if last is None and not started.is_set():
            started.set()
            hold.wait(30)  # the first request keeps the engine busy

    with running_server(tiny_models.target, None, capacity=1) as server:
        assert server.address is not None
        address = server.address
        engine_thread(server).runner.on_job = on_job
        replies: list[Any] = []
        first = threading.Thread(
            target=lambda: replies.append(request(address, "POST", CHAT, BODY))
        )
        first.start()
        assert started.wait(30)
        second = threading.Thread(
            target=lambda: replies.append(request(address, "POST", CHAT, BODY))
        )
        second.start()
        deadline = time.monotonic() + 30
        while engine_thread(server).waiting < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        refused = request(address, "POST", CHAT, BODY)
        hold.set()
        first.join(30)
        second.join(30)
    assert refused.status == 503
    assert refused.headers["retry-after"].isdigit()
    assert _error(refused)["code"] == "queue_full"
    assert [r.status for r in replies] == [200, 200]


def test_an_engine_failure_is_500_and_the_server_stays_up(
    server: ApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert server.address is not None
    engine = engine_thread(server).engine
    real = engine.generate
    calls = []

    def failing(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("the pass failed")
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "generate", failing)
    failed = request(server.address, "POST", CHAT, BODY)
    assert failed.status == 500
    assert "the pass failed" in _error(failed)["message"]
    assert request(server.address, "POST", CHAT, BODY).status == 200
