"""llama.cpp's llama-server as a bench peer: found where `make llama-tools` builds it, run as
a ServerProcess."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specchat.bench.peers.server_process import PeerError, ServerProcess

#: Where tools/build_llama_server.sh keeps its builds (one folder per version and flags).
TOOLS_DIR = (
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "specchat" / ("llama-tools")
)


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


class LlamaServer(ServerProcess):
    """One llama-server process with `extra` arguments on top of `settings`."""

    def __init__(self, binary: Path, settings: ServerSettings, extra: Sequence[str]) -> None:
        super().__init__()
        self.binary = binary
        self.settings = settings
        self.extra = tuple(extra)
        self.label = f"llama-server {' '.join(self.extra)}"

    def command(self, port: int) -> list[str]:
        return [
            str(self.binary),
            *self.settings.arguments(),
            *self.extra,
            *("--host", "127.0.0.1", "--port", str(port)),
        ]

    def request_fields(self) -> dict[str, Any]:
        # Never answered from an earlier request's cache: each request reads its prompt
        # (outside the decode time either way) and decodes from its own state.
        return {"cache_prompt": False}
