"""Python's cyclic garbage collection kept on the GUI thread, where Qt objects may die."""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer

#: How often the GUI thread looks whether a collection is due.
INTERVAL_MS = 500


def collect_due(thresholds: tuple[int, ...]) -> None:
    """Collect the oldest generation whose count passed its threshold (if any)."""
    counts = gc.get_count()
    for generation in (2, 1, 0):
        if counts[generation] > thresholds[generation]:
            gc.collect(generation)
            return


class GuiThreadCollector(QObject):
    """Runs the cyclic garbage collector only on the GUI thread.

    Left automatic, a collection runs on whichever thread happens to allocate when a threshold
    is crossed — a download, optimise or generation worker — and a Qt object caught in a
    reference cycle is then destroyed on that thread, which crashes the process (seen as a
    segmentation fault "Garbage-collecting" inside a worker's HTTP call). So automatic
    collection is switched off and the GUI thread collects on a timer, generation by
    generation, as soon as the counts pass the same thresholds the automatic one uses.

    Attributes:
        timer: the GUI-thread timer that checks the counts.
    """

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        gc.disable()
        self._thresholds = gc.get_threshold()
        self.timer = QTimer(self)
        self.timer.setInterval(INTERVAL_MS)
        self.timer.timeout.connect(self._on_timeout)
        self.timer.start()

    def _on_timeout(self) -> None:
        collect_due(self._thresholds)

    def stop(self) -> None:
        """Give collection back to the interpreter (after the last Qt object is gone)."""
        self.timer.stop()
        gc.enable()
