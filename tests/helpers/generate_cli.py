"""`specchat generate` on the tiny pair with one drafting mode: what it wrote and what it said."""

from __future__ import annotations

import pytest

from specchat.cli import main
from specchat.tinymodels import TinyModels

#: A prompt whose answer repeats itself, so that any drafter finds something to draft.
REPEATING_PROMPT = "the cat sat on the mat, the cat sat"


def generate_on_tiny(
    tiny_models: TinyModels, mode: str, capsys: pytest.CaptureFixture[str]
) -> tuple[str, str]:
    """(stdout, stderr) of 24 greedy tokens in `mode`, K = 3, one thread, on the tiny pair."""
    argv = ["generate", "--target", str(tiny_models.target)]
    argv += ["--draft", str(tiny_models.draft_close), "--mode", mode, "--k", "3"]
    argv += ["--max-tokens", "24", "--threads", "1", "--n-ctx", "512", "--color", "never"]
    assert main([*argv, "--prompt", REPEATING_PROMPT]) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err
