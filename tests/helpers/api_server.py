"""A real `specchat serve` server on the tiny models, on 127.0.0.1 and a free port."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specchat.engine.prefix_cache import PrefixCache
from specchat.engine.session import ChatEngine
from specchat.serve.engine_thread import EngineThread
from specchat.serve.guard import ServeOptions
from specchat.serve.server import Address, ApiServer


@dataclass(frozen=True)
class Reply:
    """A raw HTTP reply.

    Attributes:
        status: the status code.
        headers: the headers, names in lower case.
        body: the body as sent.
    """

    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@contextmanager
def running_server(
    target: Path,
    draft: Path | None,
    *,
    n_ctx: int = 1024,
    prefixes: PrefixCache | None = None,
    **options: Any,
) -> Iterator[ApiServer]:
    """Load the pair, serve it on a free port, and stop both afterwards (checked)."""
    engine = ChatEngine.load(target, draft, n_ctx=n_ctx, n_threads=1)
    server = ApiServer.for_engine(
        engine,
        ServeOptions(port=0, **options),
        calibrate_plain=False,
        profile=False,
        prefixes=prefixes,
    )
    try:
        server.start()
        yield server
    finally:
        stopped = server.stop(timeout_s=20)
        engine.close()
    assert stopped, "the server did not stop"


def request(
    address: Address,
    method: str,
    path: str,
    body: bytes | dict[str, Any] | None = None,
    *,
    headers: dict[str, str] | None = None,
) -> Reply:
    """One raw HTTP request (no client library between the test and the server)."""
    connection = http.client.HTTPConnection(address.host, address.port, timeout=60)
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    sent = {"Content-Type": "application/json", **(headers or {})}
    try:
        connection.request(method, path, body=data, headers=sent)
        response = connection.getresponse()
        return Reply(
            response.status,
            {k.lower(): v for k, v in response.getheaders()},
            response.read(),
        )
    finally:
        connection.close()


def engine_thread(server: ApiServer) -> EngineThread:
    """The engine thread of a server made by `running_server`."""
    assert isinstance(server.executor, EngineThread)
    return server.executor
