"""ui/panels/fixed_label.py: an elided label keeps its whole text, shows what fits, and never asks
for more than a few characters' width."""

from __future__ import annotations

from PySide6.QtWidgets import QApplication, QHBoxLayout, QLabel, QWidget
from pytestqt.qtbot import QtBot

from specchat.ui.panels.fixed_label import ElidedLabel

TEXT = "not measured yet"


def _shown(label: ElidedLabel) -> str:
    """What the label paints (QLabel's own text), not the whole text it keeps."""
    return QLabel.text(label)


def test_elided_label_shows_what_fits_and_keeps_the_whole(qtbot: QtBot) -> None:
    holder = QWidget()
    qtbot.addWidget(holder)
    label = ElidedLabel(TEXT, min_chars=4)
    QHBoxLayout(holder).addWidget(label)
    assert label.minimumSizeHint().width() < label.sizeHint().width()
    holder.resize(label.sizeHint().width() + 40, 40)
    holder.show()
    qtbot.waitExposed(holder)
    assert _shown(label) == TEXT
    holder.resize(label.minimumSizeHint().width() + 20, 40)
    QApplication.processEvents()
    shown = _shown(label)
    assert shown.endswith("…") and TEXT.startswith(shown[:-1])
    assert label.fontMetrics().horizontalAdvance(shown) <= label.contentsRect().width()
    assert label.text() == TEXT
    # Wide again, a new text shows whole.
    holder.resize(label.sizeHint().width() + 200, 40)
    label.setText("18.2 tok/s")
    QApplication.processEvents()
    assert _shown(label) == label.text() == "18.2 tok/s"
