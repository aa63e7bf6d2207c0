"""The dark theme draws what people need to see: idle buttons look idle, checkbox squares
and spin-box arrows show on the dark window."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from PySide6.QtCore import QRect
from PySide6.QtGui import QColor, QImage
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QPushButton,
    QSpinBox,
    QStyle,
    QStyleOptionSpinBox,
    QWidget,
)
from pytestqt.qtbot import QtBot

from specchat.ui import palette


@pytest.fixture
def dark(qtbot: QtBot) -> Iterator[QColor]:
    """The dark theme applied; yields the window colour."""
    palette.apply_theme("dark")
    app = QApplication.instance()
    assert isinstance(app, QApplication)
    yield app.palette().window().color()
    palette.apply_theme("light")


def _image(qtbot: QtBot, widget: QWidget) -> QImage:
    qtbot.addWidget(widget)
    widget.show()
    qtbot.waitExposed(widget)
    return widget.grab().toImage()


def _visible_pixels(image: QImage, rect: QRect, background: QColor, *, step: int = 40) -> int:
    """Pixels in `rect` whose lightness differs from `background` by more than `step`."""
    count = 0
    for x in range(max(0, rect.left()), min(image.width(), rect.right() + 1)):
        for y in range(max(0, rect.top()), min(image.height(), rect.bottom() + 1)):
            if abs(image.pixelColor(x, y).lightness() - background.lightness()) > step:
                count += 1
    return count


def test_an_unchecked_checkbox_square_shows(qtbot: QtBot, dark: QColor) -> None:
    box = QCheckBox("")
    image = _image(qtbot, box)
    assert _visible_pixels(image, image.rect(), dark) >= 20


def test_spin_box_arrows_show(qtbot: QtBot, dark: QColor) -> None:
    spin = QSpinBox()
    spin.setValue(3)
    image = _image(qtbot, spin)
    option = QStyleOptionSpinBox()
    spin.initStyleOption(option)
    for control in (QStyle.SubControl.SC_SpinBoxUp, QStyle.SubControl.SC_SpinBoxDown):
        rect = spin.style().subControlRect(QStyle.ComplexControl.CC_SpinBox, option, control, spin)
        inner = rect.adjusted(3, 2, -3, -2)  # the arrow, not the button's frame
        assert _visible_pixels(image, inner, dark, step=60) >= 4, control


def test_an_idle_button_looks_idle(qtbot: QtBot, dark: QColor) -> None:
    idle, live = QPushButton("Stop"), QPushButton("Stop")
    idle.setEnabled(False)
    idle_image, live_image = _image(qtbot, idle), _image(qtbot, live)

    def brightest(image: QImage) -> int:
        inner = image.rect().adjusted(6, 6, -6, -6)  # the label, not the border
        return max(
            image.pixelColor(x, y).lightness()
            for x in range(inner.left(), inner.right())
            for y in range(inner.top(), inner.bottom())
        )

    # The idle label is far dimmer than the live one (not a shade of the same grey).
    assert brightest(idle_image) < brightest(live_image) - 80
