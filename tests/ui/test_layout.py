"""The side panel fits a 1366×768 screen without scrolling, and its lines keep their height."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QPoint
from PySide6.QtWidgets import QApplication, QWidget
from pytestqt.qtbot import QtBot

from specchat import settings as cfg
from specchat.tinymodels import TinyModels
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
