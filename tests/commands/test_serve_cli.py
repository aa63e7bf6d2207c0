"""`specchat serve` as a person runs it: a process that prints its address, answers, and
stops cleanly on Ctrl-C; model files it cannot use refused in one line before loading."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specchat.cli import main
from specchat.paths import HOME_ENV
from specchat.serve.server import Address
from specchat.tinymodels import TinyModels
from tests.commands.test_generate_input_errors import one_line_error
from tests.helpers.api_server import request


def start_serve(
    options: list[str], *, model_id: str = "tiny-target", home: Path | None = None
) -> tuple[subprocess.Popen[str], Address, list[str]]:
    """`specchat serve` with `options` on a free port (`home`: its SPECCHAT_HOME, by default
    the tests'): the process, its address, and what it wrote on stderr up to the line naming
    the address."""
    command = [sys.executable, "-m", "specchat", "serve", *options, "--port", "0"]
    env = None if home is None else {**os.environ, HOME_ENV: str(home)}
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    assert process.stderr is not None
    lines: list[str] = []
    deadline = time.monotonic() + 120
    found = None
    pattern = rf"serving {re.escape(model_id)} at http://127\.0\.0\.1:(\d+)/v1"
    while found is None and time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            process.kill()
            process.wait()
            raise AssertionError("".join(lines))
        lines.append(line)
        found = re.search(pattern, line)
    assert found is not None, "".join(lines)
    return process, Address("127.0.0.1", int(found.group(1))), lines


def stop_serve(process: subprocess.Popen[str]) -> str:
    """Ctrl-C, then the rest of stderr; the process must have ended cleanly."""
    try:
        process.send_signal(signal.SIGINT)
        _, rest = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, rest
    assert "Traceback" not in rest
    return rest


def test_serve_prints_its_address_answers_and_stops_on_ctrl_c(tiny_models: TinyModels) -> None:
    options = ["--target", str(tiny_models.target), "--draft", str(tiny_models.draft_close)]
    process, address, _ = start_serve([*options, "--ctx", "512", "--threads", "1"])
    try:
        assert request(address, "GET", "/health").status == 200
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}
        reply = request(address, "POST", "/v1/chat/completions", body)
        assert reply.status == 200
        assert reply.json()["usage"]["completion_tokens"] <= 5
    finally:
        stop_serve(process)


def test_no_idle_timing_leaves_the_machine_to_others_between_requests(
    tiny_models: TinyModels, tmp_path: Path
) -> None:
    """Idle, `specchat serve` times plain speed and its cost table; `--no-idle-timing` (a
    benchmark timing other servers meanwhile) times none of it."""
    options = ["--target", str(tiny_models.target), "--ctx", "512", "--threads", "1"]
    for flag, timed in (([], True), (["--no-idle-timing"], False)):
        home = tmp_path / ("timing" if timed else "quiet")
        process, address, _ = start_serve([*options, *flag], home=home)
        try:
            body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
            assert request(address, "POST", "/v1/chat/completions", body).status == 200
            time.sleep(1.0)  # idle
        finally:
            stop_serve(process)
        tables = [
            json.loads(path.read_text(encoding="utf-8"))
            for path in (home / "cache" / "costs").glob("*.json")
        ]
        assert tables, home
        # Timed passes leave samples; an answer's own rounds only correct the prices.
        assert any(table["samples"] for table in tables) is timed, flag


def _files_given(tmp_path: Path, tiny_models: TinyModels) -> list[tuple[list[str], str]]:
    target = ["--target", str(tiny_models.target)]
    return [
        (["--target", str(tmp_path)], "is a folder"),
        ([*target, "--draft", str(tmp_path)], "is a folder"),
        (["--target", str(tmp_path / "gone.gguf")], "model file not found"),
        ([*target, "--draft", str(tmp_path / "gone.gguf")], "model file not found"),
        (["--draft", str(tiny_models.draft_close)], "--draft needs --target"),
    ]


def test_model_files_it_cannot_use_are_refused_in_one_line_before_loading(
    tmp_path: Path, tiny_models: TinyModels, capsys: pytest.CaptureFixture[str]
) -> None:
    for options, said in _files_given(tmp_path, tiny_models):
        assert main(["serve", *options, "--port", "0"]) == 2, options
        err = capsys.readouterr().err
        # One line, and nothing loaded first: no "loading …" line before it.
        assert len(err.splitlines()) == 1, err
        assert said in err, options


def test_a_file_that_is_no_gguf_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = tmp_path / "notes.gguf"
    text.write_text("not a model\n" * 10)
    assert main(["serve", "--target", str(text), "--port", "0"]) == 2
    assert "not a usable GGUF file" in one_line_error(capsys)
