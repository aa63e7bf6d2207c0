"""The window's status bar: the last event, UI latency and a pair's loading progress."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QProgressBar, QPushButton, QStatusBar

from specchat.engine.types import Stats, StopReason

#: The status bar's sentence for each way an answer ends.
_ENDINGS = {
    StopReason.EOS: "Answer finished",
    StopReason.MAX_TOKENS: "Answer cut at the token limit",
    StopReason.STOP_STRING: "Answer finished at a stop string",
    StopReason.CANCELLED: "Answer stopped",
    StopReason.CONTEXT_FULL: "Answer cut: the context window is full",
}


def answer_status(stop: StopReason | None, stats: Stats | None) -> str:
    """How the last answer ended, with its rate: "Answer finished · 24.0 tok/s."."""
    rate = f" · {stats.tokens_per_s:.1f} tok/s" if stats and stats.rounds else ""
    return f"{_ENDINGS[stop] if stop else 'Answer failed'}{rate}."


class StatusLine:
    """The widgets placed in a window's status bar.

    Attributes:
        status_label: what just happened ("Answering…", "Exported to …").
        latency_label: the worst event-loop delay of the last answer.
        load_bar: a load's progress, shown while a pair loads.
        cancel_load_button: cancels the load, shown while a pair loads.
    """

    def __init__(self, bar: QStatusBar) -> None:
        self.status_label = QLabel("")
        self.load_bar = QProgressBar()
        self.load_bar.setRange(0, 1000)
        # Wide enough for the longest stage's text ("calibrating 100%"): never clipped.
        longest = self.load_bar.fontMetrics().horizontalAdvance("calibrating 100%")
        self.load_bar.setMinimumWidth(longest + 48)
        self.load_bar.setMaximumWidth(max(220, longest + 48))
        self.load_bar.setTextVisible(True)
        self.load_bar.hide()
        self.cancel_load_button = QPushButton("Cancel")
        self.cancel_load_button.hide()
        self.latency_label = QLabel("")
        self.latency_label.setToolTip("Worst event-loop delay measured during the last answer")
        bar.addWidget(self.status_label, 1)
        bar.addPermanentWidget(self.latency_label)
        bar.addPermanentWidget(self.load_bar)
        bar.addPermanentWidget(self.cancel_load_button)

    def say(self, text: str) -> None:
        """Show what just happened ("Answer copied.", "Exported to …")."""
        self.status_label.setText(text)

    def show_loading(self, label: str) -> None:
        """A load of `label` began."""
        self.load_bar.setValue(0)
        self.load_bar.setFormat("loading %p%")
        self.load_bar.show()
        self.cancel_load_button.show()
        self.status_label.setText(f"Loading {label}…")

    def show_progress(self, stage: str, overall: float) -> None:
        """The load reached `overall` (0..1), in `stage`."""
        self.load_bar.setValue(round(overall * 1000))
        self.load_bar.setFormat(f"{stage} %p%")

    def hide_loading(self) -> None:
        """The load ended (loaded, failed or cancelled)."""
        self.load_bar.hide()
        self.cancel_load_button.hide()

    def show_prompt_reading(self, done: int, total: int, eta_s: float | None) -> None:
        """A long prompt is being read: how far, and about how long is left."""
        self.load_bar.setValue(round(1000 * done / max(1, total)))
        self.load_bar.setFormat("prompt %p%")
        self.load_bar.show()
        left = "" if eta_s is None else f", about {max(1, round(eta_s))} s left"
        self.status_label.setText(f"Reading the prompt: {done:,} of {total:,} tokens{left}…")
