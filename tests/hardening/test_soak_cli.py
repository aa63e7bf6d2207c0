"""`specchat soak` too short to measure ends in a message, not a traceback."""

from __future__ import annotations

import pytest

from specchat.cli import main


def test_a_soak_too_short_to_measure_says_so(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # One decode thread: a second one spin-waiting against other processes on a small
    # shared machine makes even the tiny model crawl.
    monkeypatch.setattr("specchat.engine.llamacpp.model.default_threads", lambda _size: 1)
    # 60 µs: the clock is read before each answer, so exactly one answer runs (no answer of
    # even the tiny pair takes less), fewer than the four the report needs.
    code = main(["soak", "--tiny", "--minutes", "0.000001"])
    err = capsys.readouterr().err
    assert code != 0
    assert "soak too short" in err and "--minutes" in err and "Traceback" not in err
