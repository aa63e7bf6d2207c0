"""An event-loop latency probe: how late a fast timer fires while the window is busy."""

from __future__ import annotations

import time

from PySide6.QtCore import QObject, Qt, QTimer, Slot


class LatencyProbe(QObject):
    """Fires a precise timer every `interval_ms` and records how late each tick was.

    Lateness is the time between two ticks beyond the interval: a blocked UI thread shows
    up as one long gap.

    Attributes:
        interval_ms: the timer's interval.
        worst_ms: the worst lateness since the last reset.
        ticks: ticks since the last reset.
    """

    def __init__(self, parent: QObject | None = None, *, interval_ms: int = 10) -> None:
        super().__init__(parent)
        self.interval_ms = interval_ms
        self.worst_ms = 0.0
        self.ticks = 0
        self._last: float | None = None
        self._timer = QTimer(self)
        self._timer.setTimerType(Qt.TimerType.PreciseTimer)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self._on_tick)

    @property
    def running(self) -> bool:
        return self._timer.isActive()

    def start(self) -> None:
        self.reset()
        self._last = time.perf_counter()
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()
        self._last = None

    def reset(self) -> None:
        self.worst_ms = 0.0
        self.ticks = 0

    @Slot()
    def _on_tick(self) -> None:
        now = time.perf_counter()
        if self._last is not None:
            late = (now - self._last) * 1000.0 - self.interval_ms
            self.worst_ms = max(self.worst_ms, late)
        self._last = now
        self.ticks += 1
