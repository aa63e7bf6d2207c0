"""Tests for `specchat generate` on the tiny models."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from specchat.cli import main
from specchat.engine.types import TokenKind
from specchat.tinymodels import TinyModels
from specchat.tokenstyle import ANSI_RESET, ansi


def test_generate_streams_coloured_tokens_and_stats(
    tiny_models: TinyModels, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "generate",
            "--target",
            str(tiny_models.target),
            "--draft",
            str(tiny_models.draft_close),
            "--mode",
            "draft",
            "--k",
            "3",
            "--max-tokens",
            "40",
            "--color",
            "always",
            "--n-ctx",
            "512",
            "--prompt",
            "hello there",
        ]
    )
    captured = capsys.readouterr()
    assert code == 0
    assert ansi(TokenKind.ACCEPTED) in captured.out
    assert ANSI_RESET in captured.out
    assert "tok/s" in captured.err and "α =" in captured.err
    assert "stopped: token limit reached" in captured.err


def test_generate_plain_output_when_not_a_terminal(
    tiny_models: TinyModels, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "generate",
            "--target",
            str(tiny_models.target),
            "--mode",
            "lookup",
            "--max-tokens",
            "20",
            "--n-ctx",
            "512",
            "--prompt",
            "abc abc abc",
        ]
    )
    assert code == 0
    assert "\x1b[" not in capsys.readouterr().out


def test_generate_refuses_incompatible_draft_with_reason(
    tiny_models: TinyModels, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "generate",
            "--target",
            str(tiny_models.target),
            "--draft",
            str(tiny_models.odd_vocab),
            "--mode",
            "draft",
            "--prompt",
            "hi",
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "draft cannot serve this target" in err and "Traceback" not in err


def test_generate_needs_a_draft_for_draft_mode(
    tiny_models: TinyModels, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["generate", "--target", str(tiny_models.target), "--mode", "draft", "--prompt", "hi"]
    )
    assert code == 2
    assert "needs a draft model" in capsys.readouterr().err


def test_generate_attaches_files_to_the_message_and_drafts_from_them(
    tiny_models: TinyModels,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from specchat.engine.session import ChatEngine

    first, second = tmp_path / "a.py", tmp_path / "notes.txt"
    first.write_text("def add(a, b):\n    return a + b\n", encoding="utf-8")
    second.write_bytes("caf\u00e9\n".encode())
    asked: list[str] = []
    stored: list[set[object]] = []
    real_prepare = ChatEngine.prepare

    def prepare(self: ChatEngine, messages: Any, **options: Any) -> Any:
        asked.append(messages[-1].content)
        stored.append(self.said.stored())
        return real_prepare(self, messages, **options)

    monkeypatch.setattr(ChatEngine, "prepare", prepare)
    argv = ["generate", "--target", str(tiny_models.target), "--max-tokens", "8"]
    argv += ["--n-ctx", "512", "--attach", str(first), "--attach", str(second)]
    assert main([*argv, "--prompt", "add logging"]) == 0
    assert asked == [
        "a.py\n```python\ndef add(a, b):\n    return a + b\n```\n\n"
        "notes.txt\n```text\ncaf\u00e9\n```\n\nadd logging"
    ]
    assert stored == [{("attachment", 0, 0), ("attachment", 0, 1)}]


def test_generate_refuses_a_binary_attachment_with_the_reason(
    tiny_models: TinyModels, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    binary = tmp_path / "blob.bin"
    binary.write_bytes(b"\x00\x01\x02binary")
    code = main(
        ["generate", "--target", str(tiny_models.target), "--attach", str(binary), "--prompt", "x"]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "--attach: blob.bin looks binary (it holds NUL bytes)" in err
    assert "Traceback" not in err
