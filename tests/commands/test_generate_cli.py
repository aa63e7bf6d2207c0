"""Tests for `specchat generate` on the tiny models."""

from __future__ import annotations

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
