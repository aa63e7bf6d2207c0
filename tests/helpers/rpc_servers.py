"""`specchat rpc-server` processes on loopback for the tests, each serving this machine's
CPU on a free port, stopped (or killed mid-answer) by the test."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from specchat.engine.llamacpp.rpc_wire import RpcServerError, probe

#: How long a server may take to start listening (it initialises llama.cpp first).
START_TIMEOUT_S = 60.0


@dataclass
class RpcServer:
    """One running server.

    Attributes:
        endpoint: "127.0.0.1:port".
        process: its process.
    """

    endpoint: str
    process: subprocess.Popen[bytes]

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(timeout=30)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_command(port: int, *, threads: int = 1) -> list[str]:
    """The command line of one server (for a shell inside a network namespace too)."""
    return [
        sys.executable,
        "-m",
        "specchat",
        "rpc-server",
        "--port",
        str(port),
        "--threads",
        str(threads),
    ]


def wait_until_serving(endpoint: str, process: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            probe(endpoint, timeout=2.0)
            return
        except RpcServerError:
            if process is not None and process.poll() is not None:
                code = process.returncode
                raise RuntimeError(f"rpc-server {endpoint} exited with {code}") from None
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@contextmanager
def rpc_servers(count: int) -> Iterator[Sequence[RpcServer]]:
    """`count` servers on loopback, stopped when the block ends."""
    servers: list[RpcServer] = []
    try:
        for _ in range(count):
            port = free_port()
            process = subprocess.Popen(
                server_command(port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            servers.append(RpcServer(f"127.0.0.1:{port}", process))
        for server in servers:
            wait_until_serving(server.endpoint, server.process)
        yield servers
    finally:
        for server in servers:
            if server.process.poll() is None:
                server.kill()
