"""The per-position chart keeps every bar inside its plot, for 1 to 64 positions."""

from __future__ import annotations

from itertools import pairwise

import pytest
from PySide6.QtCore import QRectF

from specchat.ui.panels.gauge import bar_rects


@pytest.mark.parametrize("n", [1, 4, 16, 64])
@pytest.mark.parametrize("width", [60.0, 240.0])
def test_bars_stay_inside_the_plot(n: int, width: float) -> None:
    plot = QRectF(10.0, 5.0, width, 80.0)
    bars = bar_rects(plot, [1.0] * n)
    assert len(bars) == n
    for bar in bars:
        assert bar.left() >= plot.left() and bar.right() <= plot.right() + 1e-9
        assert bar.width() > 0 and bar.bottom() == pytest.approx(plot.bottom())
    assert all(a.right() <= b.left() for a, b in pairwise(bars))


def test_bar_height_is_the_rate() -> None:
    bars = bar_rects(QRectF(0.0, 0.0, 100.0, 50.0), [0.0, 0.5, 1.0])
    assert [b.height() for b in bars] == [0.0, 25.0, 50.0]
