"""A peer that is a server process: started on 127.0.0.1 at a free port, healthy before it
is asked, asked through its OpenAI chat endpoint, stopped."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specchat import child_processes

#: A server that is not healthy by then has failed to start (a big model loads in seconds).
START_TIMEOUT_S = 600.0


class PeerError(RuntimeError):
    """A peer could not be built, started or asked."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class ChatReply:
    """One answer from a server's chat endpoint.

    Attributes:
        text: the message's content.
        timings: the server's own `timings` (predicted_n, predicted_ms, draft_n...).
        wall_s: the request from sending to its last byte, prompt reading included.
        first_pass_timed: whether `timings` count the pass that gives the first token with
            the answer (SpecChat's do; llama-server counts it as prompt reading).
    """

    text: str
    timings: Mapping[str, Any]
    wall_s: float
    first_pass_timed: bool = False

    @property
    def tokens(self) -> int:
        return int(self.timings.get("predicted_n", 0))

    @property
    def decode_tok_s(self) -> float:
        """One pass a token on either side: llama-server samples the first token from the
        prompt's pass and counts that pass as prompt reading, so its speed is the tokens
        after the first over the time after the first; SpecChat's timed loop starts with
        that pass, so its speed is every token over the whole time. Both count an answer's
        end-of-generation token, whose pass the time holds."""
        ms = float(self.timings.get("predicted_ms", 0.0))
        counted = self.tokens if self.first_pass_timed else self.tokens - 1
        return counted / ms * 1000.0 if counted > 0 and ms > 0 else 0.0

    @property
    def drafted(self) -> int:
        return int(self.timings.get("draft_n", 0))

    @property
    def accepted(self) -> int:
        return int(self.timings.get("draft_n_accepted", 0))


class ServerProcess:
    """One server process, `command()` given the port it listens on.

    Attributes:
        label: how errors name it.
        port: where it listens (0 before it starts).
    """

    label = "server"
    #: Whether its `timings` count the first token's pass (see ChatReply).
    first_pass_timed = False
    #: Whether it is SpecChat's own program (which then ends by itself with the bench).
    own = False

    def __init__(self) -> None:
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None
        # Its output, for the error when it fails to start (closed with the server).
        self._log = tempfile.TemporaryFile()  # noqa: SIM115

    def __enter__(self) -> ServerProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def command(self, port: int) -> list[str]:
        raise NotImplementedError

    def request_fields(self) -> dict[str, Any]:
        """What every chat request carries beyond the chat itself."""
        return {}

    def environment(self) -> Mapping[str, str] | None:
        """The process's environment (None: this one's), fixed when it starts."""
        return None

    def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Start it and wait until /health answers 200 (loading and warm-up are not timed)."""
        self.port = free_port()
        environment = self.environment()
        self._process = child_processes.start(
            self.command(self.port),
            own=self.own,
            env=environment,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise PeerError(f"{self.label} exited: {self.log_tail()}")
            try:
                status, _ = self._request("GET", "/health", None, timeout=5)
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise PeerError(f"{self.label} not healthy in {timeout_s:.0f} s")

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._process is not None:
            child_processes.forget(self._process)
        self._process = None

    def close(self) -> None:
        self.stop()
        self._log.close()

    def log_tail(self, lines: int = 8) -> str:
        self._log.seek(0)
        text = self._log.read().decode("utf-8", "replace").strip().splitlines()
        return " | ".join(text[-lines:])

    def _request(
        self, method: str, path: str, body: Mapping[str, Any] | None, *, timeout: float
    ) -> tuple[int, bytes]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            payload = None if body is None else json.dumps(body).encode()
            headers = {"Content-Type": "application/json"} if body is not None else {}
            connection.request(method, path, payload, headers)
            reply = connection.getresponse()
            return reply.status, reply.read()
        finally:
            connection.close()

    def chat(
        self, messages: Sequence[Mapping[str, str]], *, max_tokens: int, temperature: float = 0.0
    ) -> ChatReply:
        """One non-streamed chat completion, greedy at temperature 0."""
        body = {
            "model": "peer",
            "messages": list(messages),
            "max_tokens": max_tokens,
            "temperature": temperature,
            "seed": 1234,
            **self.request_fields(),
        }
        began = time.perf_counter()
        status, data = self._request("POST", "/v1/chat/completions", body, timeout=3600)
        wall = time.perf_counter() - began
        if status != 200:
            raise PeerError(f"{self.label} answered {status}: {data[:300]!r}")
        reply = json.loads(data)
        text = reply["choices"][0]["message"].get("content") or ""
        return ChatReply(text, reply.get("timings") or {}, wall, self.first_pass_timed)
