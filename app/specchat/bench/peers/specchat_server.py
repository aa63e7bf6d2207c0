"""SpecChat's own server as a peer: `specchat serve` on the files and settings llama-server
gets, fresh for each pass over the set as llama-server is, asked alike (plain or auto): its
figures are timed between the peers' rather than in the bench's own rounds before them, and
`auto` answers as on a fresh server's first requests. It times nothing of its own while idle:
other peers are being timed then."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specchat.bench.peers.llama_server import ServerSettings
from specchat.bench.peers.server_process import ServerProcess
from specchat.own_program import own_program


class SpecChatServer(ServerProcess):
    """`specchat serve` in a process of its own, every request in `mode`."""

    first_pass_timed = True

    def __init__(self, settings: ServerSettings, draft: Path | None, mode: str) -> None:
        super().__init__()
        self.settings = settings
        self.draft = draft
        self.mode = mode
        self.label = f"specchat serve ({mode})"

    def command(self, port: int) -> list[str]:
        s = self.settings
        return [
            *own_program(),
            "serve",
            *("--target", str(s.target)),
            *(("--draft", str(self.draft)) if self.draft is not None else ()),
            *("--threads", str(s.threads), "--ctx", str(s.ctx), "--kv-cache", s.key_type),
            f"--gpu-layers={s.gpu_layers}",
            *("--host", "127.0.0.1", "--port", str(port)),
            "--no-idle-timing",
        ]

    def request_fields(self) -> dict[str, Any]:
        return {"speculative": {"mode": self.mode}}
