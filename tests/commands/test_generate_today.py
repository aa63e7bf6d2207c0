"""`specchat generate` on today's architectures: a hybrid target with an MTP head drafts under
`auto` (never "decodes without drafting"), and a Gemma 4 assistant serves as `--draft`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from specchat.cli import main
from specchat.tinyarch import write_tiny_gemma4, write_tiny_gemma4_assistant, write_tiny_qwen35

ROUND = re.compile(r"^round \d+: (\w+) K=(\d+), drafted (\d+), kept (\d+)", re.MULTILINE)


def _generate(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    base = ["generate", *argv, "--max-tokens", "80", "--threads", "1", "--n-ctx", "512"]
    assert main([*base, "--color", "never", "--stats", "--prompt", "hello world"]) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


def test_auto_drafts_on_a_hybrid_target(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = write_tiny_qwen35(tmp_path / "hybrid.gguf", mtp=True)
    _, err = _generate(["--target", str(target), "--mode", "auto"], capsys)
    assert "decodes without drafting" not in err
    assert "drafts from the target's hidden state: MTP head" in err
    rounds = ROUND.findall(err)
    assert len(rounds) >= 10
    assert any(int(drafted) > 0 for _, _, drafted, _ in rounds), err


def test_the_mtp_head_is_a_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = write_tiny_qwen35(tmp_path / "hybrid.gguf", mtp=True)
    _, err = _generate(["--target", str(target), "--mode", "mtp", "--k", "3"], capsys)
    rounds = ROUND.findall(err)
    assert rounds[0] == ("mtp", "3", "3", rounds[0][3])


def test_a_gemma4_assistant_is_a_draft(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = write_tiny_gemma4(tmp_path / "gemma4.gguf")
    assistant = write_tiny_gemma4_assistant(tmp_path / "gemma4-assistant.gguf")
    argv = ["--target", str(target), "--draft", str(assistant), "--mode", "assistant", "--k", "2"]
    _, err = _generate(argv, capsys)
    assert "Gemma 4 assistant" in err
    rounds = ROUND.findall(err)
    assert rounds and all(mode == "assistant" for mode, *_ in rounds[:-2])
    assert sum(int(drafted) for _, _, drafted, _ in rounds) > 0
