"""The side panel fits a 1366×768 screen without scrolling, its lines keep their height, and
nothing in it runs past the window's right edge."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from PySide6.QtCore import QPoint
from PySide6.QtWidgets import QApplication, QWidget
from pytestqt.qtbot import QtBot

from specchat import settings as cfg
from specchat.engine.types import Stats
from specchat.tinymodels import TinyModels
from specchat.ui.panels.figures import SpeedFigures
from tests.ui.conftest import load_tiny

Maker = Callable[..., Any]


def _y(window: Any, widget: QWidget) -> int:
    return widget.mapTo(window.side_panel.widget(), QPoint(0, 0)).y()


def test_side_panel_fits_1366x768_and_lines_keep_their_height(
    qtbot: QtBot, make_window: Maker, tiny_models: TinyModels
) -> None:
    window = make_window()
    window.settings.set(cfg.MAX_TOKENS, 40)
    window.resize(1366, 768)
    window.show()
    qtbot.waitExposed(window)
    panel = window.side_panel
    stats = window.stats_panel
    window.controls.advanced_button.setChecked(True)
    QApplication.processEvents()
    charts_before = _y(window, stats.by_position)
    note_height = stats.speed_note.height()
    load_tiny(qtbot, window, tiny_models)
    window.controls.set_mode("auto")
    with qtbot.waitSignal(window.answer_done, timeout=60_000):
        assert window.send("Hello there")
    QApplication.processEvents()
    # Every line has text now (pair details, the speed note, auto's policy line) ...
    assert stats.speed_note.text() and stats.policy.text()
    assert window.controls.pair_detail.text()
    # ... and nothing below them moved, nor does the panel need a scroll bar.
    assert stats.speed_note.height() == note_height
    assert _y(window, stats.by_position) == charts_before
    assert stats.by_position.isVisible() and stats.over_time.isVisible()
    assert panel.widget().minimumSizeHint().height() <= panel.viewport().height()
    assert not panel.verticalScrollBar().isVisible()
    # The charts are really on screen, not below the fold.
    bottom = _y(window, stats.by_position) + stats.by_position.height()
    assert bottom <= panel.viewport().height()


def test_load_progress_text_is_not_clipped(qtbot: QtBot, make_window: Maker) -> None:
    window = make_window()
    window.resize(1366, 768)
    window.show()
    line = window.status_line
    line.show_loading("a pair")
    line.show_progress("calibrating", 0.96)
    QApplication.processEvents()
    text = line.load_bar.text()
    assert text == "calibrating 96%"
    assert line.load_bar.width() >= line.load_bar.fontMetrics().horizontalAdvance(text) + 24


#: The longest lines the panel shows while auto answers (as the policy and the speed
#: figures word them): they wrap within the panel, never past the window's edge.
POLICY_LINE = (
    "Auto policy: plain: no drafter expected to pay (suffix 0.93×, below the 1.10× it needs, "
    "draft model 0.81×, below the 1.25× it needs)"
)
SPEED = SpeedFigures(
    tokens_per_s=31.4,
    plain_tokens_per_s=18.2,
    plain_source="median of 2 plain rounds during answers",
    emitted=128,
    drafted=40,
)


def _right(window: Any, widget: QWidget) -> int:
    return widget.mapTo(window, QPoint(widget.width(), 0)).x()


@pytest.mark.parametrize(
    ("scroll_bar", "narrowest"),
    [(False, False), (True, False), (True, True)],
    ids=["whole", "scrolling", "narrowest"],
)
def test_side_panel_stays_inside_the_default_window(
    qtbot: QtBot, make_window: Maker, scroll_bar: bool, narrowest: bool
) -> None:
    # A fresh profile's window: 1180 pixels wide, as on a 1366×768 screen.
    window = make_window()
    window.show()
    qtbot.waitExposed(window)
    assert window.width() == 1180
    controls, stats, panel = window.controls, window.stats_panel, window.side_panel
    if narrowest:  # the splitter dragged as far as the panel lets it
        sizes = window.splitter.sizes()
        room = sum(sizes) - sizes[0] - panel.minimumWidth()
        window.splitter.setSizes([sizes[0], room, panel.minimumWidth()])
        QApplication.processEvents()
        assert window.splitter.sizes()[2] == panel.width() == panel.minimumWidth()
    controls.set_mode("auto")
    controls.show_policy_k(0)
    stats.show_stats(Stats(rounds=40, drafted=40, accepted=30, emitted=128), SPEED)
    stats.policy.setText(POLICY_LINE)
    if scroll_bar:  # both folds open: the panel scrolls, and the bar takes its width
        controls.advanced_button.setChecked(True)
        controls.memory_fold.set_open(True)
    QApplication.processEvents()
    assert panel.verticalScrollBar().isVisible() == scroll_bar
    assert controls.k_auto.text() == "auto: plain"
    assert "(median of 2" in stats.speed_note.text()
    viewport = panel.viewport()
    edge = _right(window, viewport)
    assert edge <= window.width()
    named = {
        "drafting": controls.mode_box,
        "auto's K": controls.k_auto,
        "policy line": stats.policy,
        "speed note": stats.speed_note,
        "plain rate": stats._labels["plain"],
    }
    for name, widget in named.items():
        assert widget.isVisible(), name
        assert _right(window, widget) <= edge, name
    # A label that does not wrap shows its whole text.
    assert controls.k_auto.width() >= controls.k_auto.sizeHint().width()
    # And so does every other part of the panel.
    for widget in panel.widget().findChildren(QWidget):
        if widget.isVisible():
            assert _right(window, widget) <= edge, (type(widget).__name__, widget.objectName())
