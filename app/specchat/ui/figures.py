"""The speed figures shown for an answer: its rate next to the measured plain rate."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SpeedFigures:
    """What the speed labels show.

    Attributes:
        tokens_per_s: this answer's rate.
        plain_tokens_per_s: the measured plain rate, or None.
        plain_source: how the plain rate was measured.
    """

    tokens_per_s: float
    plain_tokens_per_s: float | None
    plain_source: str

    @property
    def speedup(self) -> float | None:
        if not self.plain_tokens_per_s or self.tokens_per_s <= 0:
            return None
        return self.tokens_per_s / self.plain_tokens_per_s
