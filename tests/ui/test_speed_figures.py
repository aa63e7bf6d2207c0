"""Speed-ups count decoding only, and are "—" where they would mislead."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from specchat import settings as cfg
from specchat.engine.baseline import BaselineMeter as _BaselineMeter
from specchat.engine.types import Stats
from specchat.tinymodels import TinyModels
from specchat.ui.panels.figures import MIN_SPEEDUP_TOKENS, SpeedFigures
from specchat.ui.panels.gauge import StatsPanel
from tests.ui.conftest import load_tiny

Maker = Callable[..., Any]


def test_no_speedup_for_plain_or_short_answers() -> None:
    plain = SpeedFigures(30.0, 30.0, "measured", emitted=200, drafted=0)
    assert plain.speedup is None and "no drafting" in plain.why_no_speedup
    short = SpeedFigures(9.0, 30.0, "measured", emitted=2, drafted=4)
    assert short.speedup is None and "too short" in short.why_no_speedup
    real = SpeedFigures(60.0, 30.0, "measured", emitted=MIN_SPEEDUP_TOKENS, drafted=20)
    assert real.speedup == pytest.approx(2.0)


def test_panel_shows_a_dash_but_keeps_the_plain_rate(qtbot: QtBot) -> None:
    panel = StatsPanel()
    qtbot.addWidget(panel)
    stats = Stats(rounds=2, emitted=2, elapsed_s=0.2)
    panel.show_stats(stats, SpeedFigures(10.0, 30.0, "m", emitted=2, drafted=0))
    assert panel.label_text("speedup") == "—"
    assert panel.label_text("plain") == "30.0 tok/s"
    assert "no drafting" in panel.speed_note.text()


def test_plain_mode_answer_shows_no_speedup(
    qtbot: QtBot, make_window: Maker, tiny_models: TinyModels
) -> None:
    window = make_window()
    window.settings.set(cfg.MAX_TOKENS, 40)
    window.show()
    load_tiny(qtbot, window, tiny_models)
    window.controls.set_mode("plain")
    with qtbot.waitSignal(window.answer_done, timeout=60_000) as done:
        assert window.send("Hello there")
    assert done.args[0].stats.emitted >= MIN_SPEEDUP_TOKENS
    assert window.stats_panel.label_text("speedup") == "—"
    stored = window.store.messages(done.args[0].conversation_id)[-1].stats
    assert stored["speedup"] is None


def test_plain_baseline_is_the_median_of_rounds() -> None:
    meter = _BaselineMeter()
    for seconds in (0.03, 0.031, 0.029, 0.03, 0.9):  # one pass slowed by another process
        meter.observe(seconds)
    baseline = meter.current()
    assert baseline is not None
    assert baseline.tokens_per_s == pytest.approx(1 / 0.03)
    assert baseline.source.startswith("median of 5 plain rounds")
