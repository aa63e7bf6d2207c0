"""The speed figures shown for an answer: its rate next to the measured plain rate."""

from __future__ import annotations

from dataclasses import dataclass

#: Fewest decoded tokens a speed-up is shown for: below it one round's noise decides it.
MIN_SPEEDUP_TOKENS = 16


@dataclass(frozen=True)
class SpeedFigures:
    """What the speed labels show.

    Attributes:
        tokens_per_s: this answer's decoding rate (prompt reading excluded).
        plain_tokens_per_s: the measured plain rate, or None.
        plain_source: how the plain rate was measured.
        emitted: tokens decoded so far.
        drafted: draft tokens proposed so far (0 = the answer was plain decoding).
    """

    tokens_per_s: float
    plain_tokens_per_s: float | None
    plain_source: str
    emitted: int = 0
    drafted: int = 0

    @property
    def why_no_speedup(self) -> str:
        """Why no speed-up is shown, for people; "" when there is one."""
        if not self.plain_tokens_per_s or self.tokens_per_s <= 0:
            return "plain decoding not measured yet"
        if self.drafted == 0:
            # Plain decoding compared with itself would be noise around 1×.
            return "no drafting in this answer"
        if self.emitted < MIN_SPEEDUP_TOKENS:
            return f"too short to measure (under {MIN_SPEEDUP_TOKENS} tokens)"
        return ""

    @property
    def speedup(self) -> float | None:
        """Decoding rate over the plain rate; None where it would mislead."""
        if self.why_no_speedup or not self.plain_tokens_per_s:
            return None
        return self.tokens_per_s / self.plain_tokens_per_s
