"""`specchat generate` answers bad input with one line and exit status 2, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from specchat.cli import main
from specchat.tinymodels import TinyModels, TinySpec, write_tiny_model

#: Options no answer can be made with, and what the one line must say: one line each.
BAD_OPTIONS = [
    (["--temperature", "nan"], "temperature must be a number from 0 to 2 (got nan)"),
    (["--temperature", "inf"], "temperature must be a number from 0 to 2 (got inf)"),
    (["--temperature=-inf"], "temperature must be a number from 0 to 2"),
    (["--temperature", "99"], "temperature must be a number from 0 to 2 (got 99.0)"),
    (["--temperature", "-0.5"], "temperature must be a number from 0 to 2"),
    (["--top-p", "nan"], "top-p must be a number from 0 to 1"),
    (["--top-p", "1.5"], "top-p must be a number from 0 to 1"),
    (["--max-tokens", "0"], "--max-tokens must be at least 1 (got 0)"),
    (["--max-tokens", "-5"], "--max-tokens must be at least 1 (got -5)"),
    (["--n-ctx", "0"], "--n-ctx must be at least 1"),
    (["--threads", "-2"], "--threads must be at least 1"),
]


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("specchat:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize(
    ("options", "said"), BAD_OPTIONS, ids=lambda v: " ".join(v) if isinstance(v, list) else ""
)
def test_an_option_no_answer_can_be_made_with_is_refused(
    tiny_models: TinyModels, capsys: pytest.CaptureFixture[str], options: list[str], said: str
) -> None:
    code = main(["generate", "--target", str(tiny_models.target), *options, "--prompt", "hi"])
    assert code == 2
    assert said in one_line_error(capsys)


def test_a_folder_given_as_the_model_is_named_a_folder(
    tmp_path: Path, tiny_models: TinyModels, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["generate", "--target", str(tmp_path), "--prompt", "hi"]) == 2
    assert "is a folder" in one_line_error(capsys)
    draft = ["--draft", str(tmp_path)]
    target = ["--target", str(tiny_models.target)]
    assert main(["generate", *target, *draft, "--prompt", "hi"]) == 2
    assert "is a folder" in one_line_error(capsys)


def test_a_template_that_renders_nothing_is_named_as_the_cause(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = write_tiny_model(tmp_path / "mute.gguf", TinySpec(chat_template="{{ '' }}"))
    code = main(["generate", "--target", str(model), "--n-ctx", "256", "--prompt", "hi"])
    assert code == 2
    assert "chat template wrote nothing" in one_line_error(capsys)


@pytest.mark.parametrize("option", ["--prompt", "--system"])
def test_bytes_that_are_not_utf8_are_refused(tiny_models: TinyModels, option: str) -> None:
    """The shell passes raw bytes; Python reads them as lone surrogates (PEP 383)."""
    command = [sys.executable, "-m", "specchat", "generate", "--target", str(tiny_models.target)]
    arguments = [os.fsencode(a) for a in command] + [option.encode(), b"caf\xe9 \xff"]
    if option == "--system":
        arguments += [b"--prompt", b"hi"]
    done = subprocess.run(arguments, capture_output=True, timeout=120, env=os.environ)
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 2, err
    assert "Traceback" not in err
    assert err.strip().splitlines() == [
        f"specchat: {option} is not UTF-8 text (b'\\xe9' at character 3)"
    ]
