"""The plain-decoding rate speed-ups are measured against: after a load, then during answers."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from specchat.workers.generation_payloads import PlainBaseline

#: Plain rounds measured during answers that the running baseline keeps (most recent).
BASELINE_WINDOW = 64


@dataclass
class BaselineMeter:
    """Measures plain decoding: after a load, then from PLAIN rounds the policy runs."""

    calibrated: PlainBaseline | None = None
    recent: list[float] = field(default_factory=list)  # seconds per plain token

    def observe(self, seconds: float) -> None:
        self.recent.append(seconds)
        del self.recent[:-BASELINE_WINDOW]

    def current(self) -> PlainBaseline | None:
        # A handful of plain rounds inside answers is closer to what drafting competes with
        # (same context lengths) than the calibration; before that, the calibration stands.
        if len(self.recent) >= 4:
            rate = robust_rate(self.recent)
            return PlainBaseline(
                rate, f"median of {len(self.recent)} plain rounds during answers", len(self.recent)
            )
        return self.calibrated


def robust_rate(seconds: list[float]) -> float:
    """Tokens per second from per-token times: the median, so one slow pass (another
    process, a page fault) does not move the baseline every speed-up is divided by."""
    return 1.0 / statistics.median(seconds)
