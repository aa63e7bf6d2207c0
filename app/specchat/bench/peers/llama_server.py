"""llama.cpp's llama-server as a bench peer: found where `make llama-tools` builds it, started
on 127.0.0.1 at a free port, asked through its OpenAI chat endpoint, stopped."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Where tools/build_llama_server.sh keeps its builds (one folder per version and flags).
TOOLS_DIR = (
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "specchat" / ("llama-tools")
)
#: A server that is not healthy by then has failed to start (a big model loads in seconds).
START_TIMEOUT_S = 600.0


class PeerError(RuntimeError):
    """A peer could not be built, started or asked."""


def find_llama_server(version: str, backend: str = "cpu", explicit: Path | None = None) -> Path:
    """The llama-server built for llama-cpp-python `version` with `backend`'s flags (the
    newest such build), or `explicit`. Raises PeerError naming how to build one."""
    if explicit is not None:
        if not os.access(explicit, os.X_OK):
            raise PeerError(f"{explicit} is not an executable llama-server")
        return explicit
    wanted = {"cuda": "GGML_CUDA=on", "metal": "GGML_METAL=on"}.get(backend.lower())
    found = []
    for folder in TOOLS_DIR.glob(f"{version}-server-*"):
        binary = folder / "llama-server"
        if not os.access(binary, os.X_OK):
            continue
        flags = (
            (folder / "cmake-args.txt").read_text(encoding="utf-8")
            if (folder / "cmake-args.txt").exists()
            else ""
        )
        gpu = "GGML_CUDA=on" in flags or "GGML_METAL=on" in flags
        if (wanted is None and not gpu) or (wanted is not None and wanted in flags):
            found.append(binary)
    if not found:
        raise PeerError(
            f"no llama-server built for llama-cpp-python {version} ({backend}) in {TOOLS_DIR}: "
            "run `make llama-tools` (or tools/build_llama_tools.sh llama-server), or give "
            "--llama-server PATH"
        )
    return max(found, key=lambda p: p.stat().st_mtime)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class ServerSettings:
    """What every llama-server of a run shares with SpecChat's engine.

    Attributes:
        target: the target GGUF file.
        threads: decode (and batch) threads.
        ctx: context window.
        key_type: the KV cache's key type as llama.cpp names it ("q8_0", "f16").
        gpu_layers: layers offloaded (-1: all).
        batch: tokens one llama_decode is handed (SpecChat's n_batch and n_ubatch).
    """

    target: Path
    threads: int
    ctx: int
    key_type: str
    gpu_layers: int = -1
    batch: int = 512

    def arguments(self) -> list[str]:
        return [
            "-m",
            str(self.target),
            "-t",
            str(self.threads),
            "-tb",
            str(self.threads),
            "-c",
            str(self.ctx),
            "-b",
            str(self.batch),
            "-ub",
            str(self.batch),
            "-ctk",
            self.key_type,
            # A draft model's keys too, as SpecChat stores both models' keys alike.
            "-ctkd",
            self.key_type,
            "-ngl",
            "all" if self.gpu_layers < 0 else str(self.gpu_layers),
            # One slot, as SpecChat answers one request at a time; its thinking left in the
            # content as SpecChat's answer holds it, so the two texts compare.
            "-np",
            "1",
            "--reasoning-format",
            "none",
            "--no-webui",
        ]


@dataclass(frozen=True)
class ChatReply:
    """One answer from llama-server's chat endpoint.

    Attributes:
        text: the message's content.
        timings: llama-server's own `timings` (predicted_n, predicted_ms, draft_n...).
        wall_s: the request from sending to its last byte, prompt reading included.
    """

    text: str
    timings: Mapping[str, Any]
    wall_s: float

    @property
    def tokens(self) -> int:
        return int(self.timings.get("predicted_n", 0))

    @property
    def decode_tok_s(self) -> float:
        """Tokens after the first over the time after the first: llama-server samples the
        first token from the prompt's pass and counts that pass as prompt reading, where
        SpecChat's timed loop starts with it; so one pass a token on both sides reads the
        same."""
        ms = float(self.timings.get("predicted_ms", 0.0))
        return (self.tokens - 1) / ms * 1000.0 if self.tokens > 1 and ms > 0 else 0.0

    @property
    def drafted(self) -> int:
        return int(self.timings.get("draft_n", 0))

    @property
    def accepted(self) -> int:
        return int(self.timings.get("draft_n_accepted", 0))


class LlamaServer:
    """One llama-server process with `extra` arguments on top of `settings`."""

    def __init__(self, binary: Path, settings: ServerSettings, extra: Sequence[str]) -> None:
        self.binary = binary
        self.settings = settings
        self.extra = tuple(extra)
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None
        # Its output, for the error when it fails to start (closed with the server).
        self._log = tempfile.TemporaryFile()  # noqa: SIM115

    def __enter__(self) -> LlamaServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def command(self) -> list[str]:
        return [str(self.binary), *self.settings.arguments(), *self.extra]

    def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Start it and wait until /health answers 200 (loading and warm-up are not timed)."""
        self.port = free_port()
        command = [*self.command(), "--host", "127.0.0.1", "--port", str(self.port)]
        self._process = subprocess.Popen(
            command, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise PeerError(f"llama-server {' '.join(self.extra)} exited: {self.log_tail()}")
            try:
                status, _ = self._request("GET", "/health", None, timeout=5)
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise PeerError(f"llama-server {' '.join(self.extra)} not healthy in {timeout_s:.0f} s")

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
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
            # Never answered from an earlier request's cache: each request reads its prompt
            # (outside the decode time either way) and decodes from its own state.
            "cache_prompt": False,
        }
        began = time.perf_counter()
        status, data = self._request("POST", "/v1/chat/completions", body, timeout=3600)
        wall = time.perf_counter() - began
        if status != 200:
            raise PeerError(f"llama-server answered {status}: {data[:300]!r}")
        reply = json.loads(data)
        text = reply["choices"][0]["message"].get("content") or ""
        return ChatReply(text, reply.get("timings") or {}, wall)
