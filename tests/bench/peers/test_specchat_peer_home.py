"""`specchat serve` as a peer reads the bench's stored costs and settings, and stores what it
learns beside the other peers in a copy of them that goes when it stops: a later pass's fresh
server starts from the bench's store, not from one corrected beside llama-servers."""

from __future__ import annotations

from pathlib import Path

import pytest

from specchat import paths
from specchat.bench.peers.llama_server import ServerSettings
from specchat.bench.peers.server_process import ServerProcess
from specchat.bench.peers.specchat_server import SpecChatServer
from specchat.tinymodels import TinyModels

QUESTION = [{"role": "user", "content": "Write a Python function that adds two numbers."}]


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_serve_peer_learns_in_a_copy_of_the_bench_store(
    tiny_models: TinyModels, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench_home = tmp_path / "bench-home"
    monkeypatch.setenv(paths.HOME_ENV, str(bench_home))
    store = paths.cache_dir() / "costs"
    store.mkdir(parents=True)
    (store / "planted.json").write_text('{"stored": "by the bench"}', encoding="utf-8")
    paths.config_dir().mkdir(parents=True)
    (paths.config_dir() / "settings.json").write_text("{}", encoding="utf-8")
    before = _files(bench_home)

    settings = ServerSettings(tiny_models.target, threads=1, ctx=512, key_type="f16", gpu_layers=0)
    server = SpecChatServer(settings, tiny_models.draft_close, "auto")
    try:
        for _ in range(2):  # each start (each pass) gets a fresh copy
            server.start()
            home = server._home
            assert home is not None and home != bench_home
            assert _files(home) == before  # what a user's fresh server reads
            for _ in range(3):
                assert server.chat(QUESTION, max_tokens=24).tokens > 0
            # The server stores what it learnt when it stops: into its own home.
            ServerProcess.stop(server)
            assert _files(home) != before
            server.stop()
            assert not home.exists()
            assert _files(bench_home) == before
    finally:
        server.close()
