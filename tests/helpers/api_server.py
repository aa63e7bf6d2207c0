"""A real `specchat serve` server on the tiny models, on 127.0.0.1 and a free port."""

from __future__ import annotations

import http.client
import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specchat.engine.llamacpp.prefix_cache import PrefixCache
from specchat.engine.session import ChatEngine
from specchat.host.engine_host import EngineHost
from specchat.host.thread import HostThread
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
    body: bytes | dict[str, Any] | Iterable[bytes] | None = None,
    *,
    headers: dict[str, str] | None = None,
) -> Reply:
    """One raw HTTP request (no client library between the test and the server); a body
    given as pieces goes chunked, without a Content-Length."""
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


def engine_thread(server: ApiServer) -> EngineHost:
    """The engine host of a server made by `running_server` (on its own thread)."""
    assert isinstance(server.executor, HostThread)
    return server.executor.host


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def server_log() -> Iterator[list[logging.LogRecord]]:
    """What the server logs meanwhile: SpecChat's loggers and uvicorn's, which keeps its own
    handlers and does not pass records up to the root (where pytest's caplog listens).

    Enter it after the server started: uvicorn's logging setup replaces the handlers of
    its loggers when a server is made.
    """
    handler = _Records()
    loggers = [logging.getLogger(), logging.getLogger("uvicorn")]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield handler.records
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


def tracebacks(records: list[logging.LogRecord]) -> list[str]:
    """The records that carry a traceback or say something went wrong (ERROR and above)."""
    return [
        f"{r.name}: {r.getMessage()}"
        for r in records
        if r.exc_info is not None or r.levelno >= logging.ERROR
    ]


def handlers_running(server: ApiServer) -> int:
    """How many request handlers the server is running now."""
    # uvicorn's server state is the only place that knows; it has no public door to it.
    uvicorn_server = server._server
    assert uvicorn_server is not None
    return len(uvicorn_server.server_state.tasks)


def wait_for(condition: Callable[[], bool], *, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)
