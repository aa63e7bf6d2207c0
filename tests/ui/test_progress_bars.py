"""Progress bars that show text are tall enough to read it, in both themes."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QProgressBar, QVBoxLayout, QWidget
from pytestqt.qtbot import QtBot

from specchat.ui import palette


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_a_bar_with_text_is_as_tall_as_its_text(qtbot: QtBot, theme: str) -> None:
    palette.apply_theme(theme)
    try:
        box = QWidget()
        layout = QVBoxLayout(box)
        labelled, thin = QProgressBar(), QProgressBar()
        labelled.setTextVisible(True)
        labelled.setFormat("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf: checking…")
        thin.setTextVisible(False)
        layout.addWidget(labelled)
        layout.addWidget(thin)
        qtbot.addWidget(box)
        box.resize(600, 200)
        box.show()
        qtbot.waitExposed(box)
        assert labelled.height() >= labelled.fontMetrics().height()
        # A bar without text stays the thin line of the house style.
        assert thin.height() <= 8
    finally:
        palette.apply_theme("light")
