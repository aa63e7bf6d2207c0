"""SpecChat's own server as a peer: `specchat serve` on the files and settings llama-server
gets, fresh for each pass over the set as llama-server is, asked alike (plain or auto): its
figures are timed between the peers' rather than in the bench's own rounds before them, and
`auto` answers as on a fresh server's first requests. It times nothing of its own while idle:
other peers are being timed then.

Nor does it store what it learns. Its rounds run beside the other peers' processes, which
slow a small pass more than a large one, so a cost table it corrected would hold a shape
this machine does not have alone, and every later pass's fresh server would start from it
(docs/bench/README.md, "Against llama-server and llama-cpp-python"). Each start gets its own
SpecChat home holding a copy of the bench's settings and stored costs, the files a user's
server would read, and the copy goes when it stops."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from specchat import paths
from specchat.bench.peers.llama_server import ServerSettings
from specchat.bench.peers.server_process import ServerProcess
from specchat.own_program import own_program

#: What a private home copies from the bench's: (its folder, where it goes in the home).
_COPIED = ((paths.config_dir, "config"), (lambda: paths.cache_dir() / "costs", "cache/costs"))


class SpecChatServer(ServerProcess):
    """`specchat serve` in a process of its own, every request in `mode`."""

    first_pass_timed = True
    own = True

    def __init__(self, settings: ServerSettings, draft: Path | None, mode: str) -> None:
        super().__init__()
        self.settings = settings
        self.draft = draft
        self.mode = mode
        self.label = f"specchat serve ({mode})"
        self._home: Path | None = None

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

    def environment(self) -> Mapping[str, str]:
        """This environment with SPECCHAT_HOME at a fresh copy of the bench's settings and
        stored costs (see the module's note)."""
        self._drop_home()
        home = Path(tempfile.mkdtemp(prefix="specchat-peer-"))
        for folder, inside in _COPIED:
            source = folder()
            if source.is_dir():
                shutil.copytree(source, home / inside)
        self._home = home
        return {**os.environ, paths.HOME_ENV: str(home)}

    def stop(self) -> None:
        super().stop()
        self._drop_home()

    def _drop_home(self) -> None:
        if self._home is not None:
            shutil.rmtree(self._home, ignore_errors=True)
            self._home = None
