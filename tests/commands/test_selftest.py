"""Tests for `specchat --self-test`: the report, its exit code, and that failures are named."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from specchat import paths
from specchat.commands import selftest
from specchat.engine.session import ChatEngine

CHECKS = (
    "resources",
    "model catalog",
    "llama.cpp backend",
    "load tiny pair",
    "plain decoding",
    "draft mode (K=3) matches plain",
    "lookup mode (K=3) matches plain",
    "hybrid target drafts and rolls back",
    "MTP head drafts",
    "Qwen3.5 chat format",
    "Gemma 4 chat format",
    "Qt",
)


@pytest.fixture(autouse=True)
def _offscreen(monkeypatch: pytest.MonkeyPatch) -> None:
    # run_self_test sets QT_QPA_PLATFORM when unset; keep that inside the test.
    monkeypatch.setenv("QT_QPA_PLATFORM", os.environ.get("QT_QPA_PLATFORM", "offscreen"))


def test_self_test_passes_and_reports_every_check() -> None:
    out = io.StringIO()
    assert selftest.run_self_test(out=out) == 0
    report = out.getvalue()
    assert report.startswith(selftest.HEADER)
    for name in CHECKS:
        assert f"ok   {name}:" in report, report
    assert "FAIL" not in report
    assert report.rstrip().splitlines()[-1].startswith(selftest.PASSED)


def test_self_test_through_the_console_entry_point(tmp_path: Path) -> None:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", paths.HOME_ENV: str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "specchat", "--self-test"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert selftest.PASSED in done.stdout


def test_speculative_mismatch_fails_the_self_test(monkeypatch: pytest.MonkeyPatch) -> None:
    real_generate = selftest._generate

    def diverging(
        engine: ChatEngine, mode: str, max_tokens: int = selftest.MAX_TOKENS
    ) -> tuple[list[int], float, int]:
        tokens, alpha, drafted = real_generate(engine, mode, max_tokens)
        if mode in ("draft", "mtp"):
            tokens[-1] += 1
        return tokens, alpha, drafted

    monkeypatch.setattr(selftest, "_generate", diverging)
    out = io.StringIO()
    assert selftest.run_self_test(out=out) == 1
    report = out.getvalue()
    assert "FAIL draft mode (K=3) matches plain: differs from token 15" in report
    assert "ok   lookup mode (K=3) matches plain" in report
    assert "FAIL hybrid target drafts and rolls back: differs from token" in report
    assert "FAIL MTP head drafts: differs from token" in report
    assert selftest.FAILED in report


def test_missing_resources_fail_the_self_test(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(paths, "resources_dir", lambda: tmp_path)
    out = io.StringIO()
    assert selftest.run_self_test(out=out) == 1
    report = out.getvalue()
    assert "FAIL resources: FileNotFoundError" in report
    assert "FAIL Qt: FileNotFoundError" in report
    # The engine does not depend on resources, and the report still says so.
    assert "ok   plain decoding" in report


def test_a_reader_that_loses_the_call_fails_its_family(monkeypatch: pytest.MonkeyPatch) -> None:
    from specchat.commands import chat_format_check
    from specchat.host.answer_format import reader

    real = reader.read_answer

    def losing(*args: Any, **kwargs: Any) -> Any:
        pieces, reply = real(*args, **kwargs)
        return pieces, reader.AnswerReply(reply.content, reply.reasoning, ())

    monkeypatch.setattr(reader, "read_answer", losing)
    with pytest.raises(AssertionError, match=r"read back \[\]"):
        chat_format_check.round_trip("google-gemma-4-31B-it.jinja")
