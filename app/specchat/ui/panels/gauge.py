"""The acceptance gauge, speed figures and two small charts of how speculation is going."""

from __future__ import annotations

import math
from collections.abc import Sequence

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QFont, QPainter, QPainterPath, QPaintEvent, QPen, QPolygonF
from PySide6.QtWidgets import QFormLayout, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from specchat.engine.decoding.kept_sources import KeptSource, kept_summary
from specchat.engine.types import RoundResult, Stats
from specchat.ui import palette as palettes
from specchat.ui.panels.figures import SpeedFigures
from specchat.ui.panels.fixed_label import ElidedLabel, FixedLinesLabel

#: The gauge's arc: from 210° (lower left) clockwise through the top to -30° (lower right).
_START_DEG = 210.0
_SPAN_DEG = 240.0


class AcceptanceGauge(QWidget):
    """A painted 0–100 % dial: the current answer's acceptance rate as a filled arc, the
    conversation's as a marker on the rim.

    Attributes:
        value: the current answer's rate (0..1), or None before anything was drafted.
        marker: the conversation's rate (0..1), or None.
        marker_caption: what the marker's rate is called under the dial ("chat").
    """

    def __init__(
        self,
        parent: QWidget | None = None,
        *,
        palette: palettes.Palette | None = None,
        marker_caption: str = "chat",
    ) -> None:
        super().__init__(parent)
        self.value: float | None = None
        self.marker: float | None = None
        self.marker_caption = marker_caption
        self.palette_ = palette or palettes.current()
        self.setMinimumSize(112, 92)
        self.setToolTip(
            "Acceptance rate α: the share of drafted tokens the target kept.\n"
            "Arc: this answer. Triangle: the whole conversation."
        )
        self.setAccessibleName("Acceptance rate gauge")

    def sizeHint(self) -> QSize:
        return QSize(124, 100)

    def caption(self) -> str:
        """The small line under the rate: what the marker stands at, once it is set."""
        if self.marker is None:
            return "accepted"
        return f"{self.marker_caption} {self.marker * 100:.0f}%"

    def set_values(self, value: float | None, marker: float | None) -> None:
        self.value = None if value is None else min(1.0, max(0.0, value))
        self.marker = None if marker is None else min(1.0, max(0.0, marker))
        text = "no drafts yet" if self.value is None else f"{self.value:.0%}"
        self.setAccessibleDescription(f"acceptance {text}")
        self.update()

    def set_palette(self, palette: palettes.Palette) -> None:
        self.palette_ = palette
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        pal = self.palette_
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        side = min(self.width(), self.height() * 1.25)
        thickness = max(8.0, side * 0.09)
        radius = side / 2 - thickness
        centre = QPointF(self.width() / 2, radius + thickness + 4)
        rect = QRectF(centre.x() - radius, centre.y() - radius, 2 * radius, 2 * radius)

        track = QPen(pal.gauge_track, thickness, Qt.PenStyle.SolidLine, Qt.PenCapStyle.FlatCap)
        painter.setPen(track)
        painter.drawArc(rect, int(_START_DEG * 16), int(-_SPAN_DEG * 16))
        if self.value is not None and self.value > 0:
            fill = QPen(pal.gauge_fill, thickness, Qt.PenStyle.SolidLine, Qt.PenCapStyle.FlatCap)
            painter.setPen(fill)
            painter.drawArc(rect, int(_START_DEG * 16), int(-_SPAN_DEG * self.value * 16))

        # Ticks at every 25 %.
        painter.setPen(QPen(pal.muted_text, 1.2))
        for i in range(5):
            angle = math.radians(_START_DEG - _SPAN_DEG * i / 4)
            outer = radius + thickness / 2 + 3
            inner = radius + thickness / 2 + 7
            painter.drawLine(
                QPointF(centre.x() + outer * math.cos(angle), centre.y() - outer * math.sin(angle)),
                QPointF(centre.x() + inner * math.cos(angle), centre.y() - inner * math.sin(angle)),
            )

        if self.marker is not None:
            angle = math.radians(_START_DEG - _SPAN_DEG * self.marker)
            tip_r = radius - thickness / 2 - 1
            base_r = tip_r - thickness * 0.9
            half = math.radians(7)
            tip = QPointF(
                centre.x() + tip_r * math.cos(angle), centre.y() - tip_r * math.sin(angle)
            )
            left = QPointF(
                centre.x() + base_r * math.cos(angle + half),
                centre.y() - base_r * math.sin(angle + half),
            )
            right = QPointF(
                centre.x() + base_r * math.cos(angle - half),
                centre.y() - base_r * math.sin(angle - half),
            )
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(pal.gauge_marker)
            painter.drawPolygon(QPolygonF([tip, left, right]))

        painter.setPen(pal.text)
        font = QFont(self.font())
        font.setPointSizeF(max(9.0, side * 0.13))
        font.setBold(True)
        painter.setFont(font)
        label = "—" if self.value is None else f"{self.value * 100:.0f}%"
        text_rect = QRectF(rect.left(), centre.y() - side * 0.16, rect.width(), side * 0.2)
        painter.drawText(text_rect, Qt.AlignmentFlag.AlignCenter, label)
        small = QFont(self.font())
        small.setPointSizeF(max(7.0, side * 0.06))
        painter.setFont(small)
        painter.setPen(pal.muted_text)
        painter.drawText(
            QRectF(rect.left(), centre.y() + side * 0.05, rect.width(), side * 0.12),
            Qt.AlignmentFlag.AlignCenter,
            self.caption(),
        )
        painter.end()


class _Chart(QWidget):
    """Base of the two small charts: a framed plot area with a 0–100 % axis."""

    title = ""

    def __init__(
        self, parent: QWidget | None = None, *, palette: palettes.Palette | None = None
    ) -> None:
        super().__init__(parent)
        self.palette_ = palette or palettes.current()
        self.setFixedHeight(72)

    def sizeHint(self) -> QSize:
        return QSize(140, 72)

    def set_palette(self, palette: palettes.Palette) -> None:
        self.palette_ = palette
        self.update()

    def _frame(self, painter: QPainter) -> QRectF:
        pal = self.palette_
        small = QFont(self.font())
        small.setPointSizeF(max(7.0, small.pointSizeF() * 0.85))
        painter.setFont(small)
        painter.setPen(pal.muted_text)
        metrics_h = painter.fontMetrics().height()
        painter.drawText(
            QRectF(0, 0, self.width(), metrics_h), Qt.AlignmentFlag.AlignLeft, self.title
        )
        plot = QRectF(1, metrics_h + 2, self.width() - 2, self.height() - metrics_h - 3)
        painter.setPen(QPen(pal.chart_grid, 1))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawRect(plot)
        painter.drawLine(
            QPointF(plot.left(), plot.center().y()), QPointF(plot.right(), plot.center().y())
        )
        return plot.adjusted(3, 3, -3, -3)


class AcceptanceChart(_Chart):
    """Acceptance rate over the answer's rounds (running mean over a short window).

    Attributes:
        points: the plotted values (0..1), oldest first.
    """

    title = "acceptance over time"
    WINDOW = 8

    def __init__(
        self, parent: QWidget | None = None, *, palette: palettes.Palette | None = None
    ) -> None:
        super().__init__(parent, palette=palette)
        self.points: list[float] = []
        self._window: list[tuple[int, int]] = []

    def clear(self) -> None:
        self.points.clear()
        self._window.clear()
        self.update()

    def add_round(self, drafted: int, accepted: int) -> None:
        if drafted <= 0:
            return
        self._window.append((drafted, accepted))
        del self._window[: -self.WINDOW]
        total = sum(d for d, _ in self._window)
        self.points.append(sum(a for _, a in self._window) / total)
        del self.points[:-400]

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        plot = self._frame(painter)
        if len(self.points) >= 2:
            path = QPainterPath()
            step = plot.width() / (len(self.points) - 1)
            for i, value in enumerate(self.points):
                point = QPointF(plot.left() + i * step, plot.bottom() - value * plot.height())
                if i == 0:
                    path.moveTo(point)
                else:
                    path.lineTo(point)
            painter.setPen(QPen(self.palette_.chart_line, 1.6))
            painter.drawPath(path)
        painter.end()


class PositionChart(_Chart):
    """Acceptance rate per draft position: how often the i-th drafted token survives.

    Attributes:
        rates: acceptance per position (0..1).
    """

    title = "by draft position"

    def __init__(
        self, parent: QWidget | None = None, *, palette: palettes.Palette | None = None
    ) -> None:
        super().__init__(parent, palette=palette)
        self.rates: tuple[float, ...] = ()

    def set_rates(self, rates: Sequence[float]) -> None:
        self.rates = tuple(rates)
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        plot = self._frame(painter)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(self.palette_.chart_bar)
        for bar in bar_rects(plot, self.rates):
            painter.drawRect(bar)
        painter.end()


def bar_rects(plot: QRectF, rates: Sequence[float]) -> list[QRectF]:
    """One bar per position, bottom-aligned in `plot`, sharing its width.

    Auto's long lookups reach 64 positions, so the gap shrinks with the bars and the last bar
    always ends inside the plot.
    """
    if not rates:
        return []
    slot = plot.width() / len(rates)
    gap = min(2.0, slot * 0.25)
    return [
        QRectF(
            plot.left() + i * slot,
            plot.bottom() - rate * plot.height(),
            slot - gap,
            rate * plot.height(),
        )
        for i, rate in enumerate(rates)
    ]


class StatsPanel(QWidget):
    """Gauge, figures, charts and the auto policy's choice, fed one round at a time.

    Attributes:
        gauge: the acceptance gauge.
        over_time: acceptance over time.
        by_position: acceptance per draft position.
        kept_sources: where the answer's kept drafts came from ("Kept drafts: this chat 41 · …").
    """

    def __init__(
        self, parent: QWidget | None = None, *, palette: palettes.Palette | None = None
    ) -> None:
        super().__init__(parent)
        pal = palette or palettes.current()
        self.gauge = AcceptanceGauge(palette=pal)
        self.over_time = AcceptanceChart(palette=pal)
        self.by_position = PositionChart(palette=pal)
        self._labels: dict[str, ElidedLabel] = {}
        self._conversation = (0, 0)  # accepted, drafted before the current answer
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        # The gauge beside the figures, not above them: the panel fits a 768-pixel screen.
        top = QHBoxLayout()
        top.addWidget(self.gauge)
        form = QFormLayout()
        form.setHorizontalSpacing(8)
        form.setVerticalSpacing(2)
        for key, caption, tip in (
            ("rate", "Tokens/s", "This answer's decoding rate (prompt reading excluded)"),
            ("speedup", "Speed-up", "Decoding rate over the plain rate measured here"),
            ("plain", "Plain", "Plain decoding (no drafts) measured on this machine"),
            ("tau", "τ/pass", "τ: tokens emitted per target pass"),
            ("counts", "Kept", "Draft tokens kept / drafted"),
        ):
            label = ElidedLabel("—", min_chars=4)
            label.setObjectName(f"stat_{key}")
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            label.setToolTip(tip)
            name = QLabel(caption)
            name.setToolTip(tip)
            self._labels[key] = label
            form.addRow(name, label)
        top.addLayout(form, 1)
        layout.addLayout(top)
        # Fixed heights: a note appearing or going never moves the charts below.
        self.kept_sources = FixedLinesLabel(lines=2)
        self.kept_sources.setObjectName("kept_sources")
        layout.addWidget(self.kept_sources)
        self.speed_note = FixedLinesLabel(lines=2)
        self.speed_note.setObjectName("speed_note")
        layout.addWidget(self.speed_note)
        self.policy = FixedLinesLabel(lines=2)
        self.policy.setObjectName("policy_choice")
        layout.addWidget(self.policy)
        charts = QHBoxLayout()
        charts.addWidget(self.over_time)
        charts.addWidget(self.by_position)
        layout.addLayout(charts)

    def label_text(self, key: str) -> str:
        return self._labels[key].text()

    def set_palette(self, palette: palettes.Palette) -> None:
        for widget in (self.gauge, self.over_time, self.by_position):
            widget.set_palette(palette)

    def set_conversation_totals(self, accepted: int, drafted: int) -> None:
        """Counts of the conversation's earlier answers (the gauge's second marker)."""
        self._conversation = (accepted, drafted)
        marker = accepted / drafted if drafted else None
        self.gauge.set_values(self.gauge.value, marker)

    def begin_answer(self) -> None:
        self.over_time.clear()
        self.by_position.set_rates(())
        accepted, drafted = self._conversation
        self.gauge.set_values(None, accepted / drafted if drafted else None)
        for label in self._labels.values():
            label.setText("—")
        self.kept_sources.setText("")
        self.speed_note.setText("")
        self.policy.setText("")

    def show_round(
        self,
        result: RoundResult,
        speed: SpeedFigures,
        *,
        auto: bool,
        kept: tuple[KeptSource, ...] = (),
    ) -> None:
        """A round of the current answer; `kept` is its kept drafts so far by source."""
        stats = result.stats
        self.kept_sources.setText(f"Kept drafts: {kept_summary(kept)}")
        self.over_time.add_round(result.drafted, result.accepted)
        self.over_time.update()
        self.show_stats(stats, speed)
        # The policy line speaks of auto's choices only: a fixed mode has none to explain.
        if not auto:
            self.policy.setText("")
        elif result.events and result.choice.reason:
            self.policy.setText("Auto policy: " + result.choice.reason)

    def show_auto(self, auto: bool) -> None:
        """The mode changed: a policy line left from auto goes when auto is no longer on."""
        if not auto:
            self.policy.setText("")

    def show_stats(self, stats: Stats, speed: SpeedFigures) -> None:
        accepted, drafted = self._conversation
        total_drafted = drafted + stats.drafted
        marker = (accepted + stats.accepted) / total_drafted if total_drafted else None
        self.gauge.set_values(stats.alpha if stats.drafted else None, marker)
        self.by_position.set_rates(stats.position_rates())
        self._labels["rate"].setText(f"{speed.tokens_per_s:.1f}")
        self._labels["tau"].setText(f"{stats.tau:.2f}" if stats.rounds else "—")
        self._labels["counts"].setText(f"{stats.accepted} / {stats.drafted}")
        speedup = speed.speedup
        plain = speed.plain_tokens_per_s
        self._labels["plain"].setText("not measured yet" if plain is None else f"{plain:.1f} tok/s")
        if speedup is None:
            self._labels["speedup"].setText("—")
            self.speed_note.setText(f"No speed-up: {speed.why_no_speedup}.")
        else:
            self._labels["speedup"].setText(f"{speedup:.2f}×")
            # Say what the figure is relative to: a rate measured here, never an assumed one.
            self.speed_note.setText(
                f"Decoding only, vs plain measured here ({speed.plain_source})."
            )

    def end_answer(self, stats: Stats) -> None:
        accepted, drafted = self._conversation
        self._conversation = (accepted + stats.accepted, drafted + stats.drafted)
