"""`specchat serve` answers a client's mistakes with a 4xx in OpenAI's shape and logs no
traceback: text that is not text, bodies over the limit (declared or chunked), a client that
leaves while sending its body."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from specchat.serve.guard import MAX_BODY_BYTES
from specchat.serve.server import ApiServer
from tests.helpers.api_server import (
    handlers_running,
    request,
    server_log,
    tracebacks,
    wait_for,
)

CHAT = "/v1/chat/completions"
BODY: dict[str, Any] = {
    "model": "m",
    "messages": [{"role": "user", "content": "hello"}],
    "temperature": 0,
    "max_tokens": 4,
}
#: Well over the limit, as a client pasting a whole log file would send.
OVERSIZED = 20 << 20
LONE = "\ud800"


def _client(server: ApiServer) -> openai.OpenAI:
    assert server.address is not None
    return openai.OpenAI(base_url=server.address.base_url, api_key="unused", max_retries=0)


@pytest.mark.parametrize(
    ("change", "param"),
    [
        ({"messages": [{"role": "user", "content": f"a{LONE}b"}]}, "messages[0].content"),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": LONE}]}]},
            "messages[0].content[0].text",
        ),
        ({"stop": ["ok", LONE]}, "stop[1]"),
        ({"prediction": {"type": "content", "content": LONE}}, "prediction.content"),
    ],
)
def test_an_unpaired_surrogate_is_400_naming_the_field(
    server: ApiServer, change: dict[str, Any], param: str
) -> None:
    assert server.address is not None
    # json.dumps writes it as the escape \ud800: valid JSON, which is how such a string
    # arrives from a client that does not check its text (this openai release refuses to
    # encode it, older ones sent it).
    body = json.dumps({**BODY, **change}).encode()
    assert b"\\ud800" in body
    with server_log() as records:
        reply = request(server.address, "POST", CHAT, body)
    assert reply.status == 400
    error = reply.json()["error"]
    assert (error["type"], error["param"], error["code"]) == (
        "invalid_request_error",
        param,
        "invalid_text",
    )
    assert "unpaired surrogate" in error["message"] and "\\ud800" in error["message"]
    assert tracebacks(records) == []
    assert request(server.address, "POST", CHAT, BODY).status == 200


def test_a_body_over_the_limit_is_413_that_the_openai_client_reads(server: ApiServer) -> None:
    assert OVERSIZED > MAX_BODY_BYTES
    client = _client(server)
    with server_log() as records:
        with pytest.raises(openai.APIStatusError) as refused:
            client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": "x" * OVERSIZED}], max_tokens=4
            )
        # The same client, on the connection the refused body was drained from.
        answer = client.chat.completions.create(model="m", messages=BODY["messages"], max_tokens=4)
    assert refused.value.status_code == 413
    assert refused.value.code == "request_too_large"
    assert f"{MAX_BODY_BYTES:,} bytes" in refused.value.message
    assert answer.choices[0].message.content is not None
    assert tracebacks(records) == []


def _pieces(total: int, *, size: int = 1 << 16) -> Iterator[bytes]:
    """A JSON body `total` bytes long, sent piece by piece."""
    head = b'{"model": "m", "messages": [{"role": "user", "content": "'
    tail = b'"}]}'
    yield head
    left = total - len(head) - len(tail)
    while left > 0:
        yield b"x" * min(size, left)
        left -= size
    yield tail


def test_a_chunked_body_over_the_limit_is_413(server: ApiServer) -> None:
    assert server.address is not None
    with server_log() as records:
        reply = request(server.address, "POST", CHAT, _pieces(OVERSIZED))
    assert reply.status == 413
    error = reply.json()["error"]
    assert (error["type"], error["code"]) == ("invalid_request_error", "request_too_large")
    assert tracebacks(records) == []
    # A chunked body under the limit is read whole.
    small = json.dumps(BODY).encode()
    assert request(server.address, "POST", CHAT, iter([small[:10], small[10:]])).status == 200


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_client_leaving_mid_body_leaves_no_traceback(server: ApiServer, framing: str) -> None:
    assert server.address is not None
    address = server.address
    piece = b'{"model": "m", "messages": [{"role": "user", "content": "' + b"x" * 50_000
    if framing == "chunked":
        length, first = "Transfer-Encoding: chunked", f"{len(piece):x}\r\n".encode() + piece
    else:
        length, first = f"Content-Length: {4 * len(piece)}", piece
    with server_log() as records:
        with socket.create_connection((address.host, address.port), timeout=30) as s:
            s.sendall(
                f"POST {CHAT} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"{length}\r\n\r\n".encode()
                + first
            )
            wait_for(lambda: handlers_running(server) > 0)
        wait_for(lambda: handlers_running(server) == 0)
    assert tracebacks(records) == []
    assert request(address, "POST", CHAT, BODY).status == 200
