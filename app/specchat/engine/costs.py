"""What a target pass costs: the cost model `auto` prices every option with."""

from __future__ import annotations

from dataclasses import dataclass, field

#: Relative cost of one more token in a target batch, before anything is measured. On a
#: 2-core CPU a batch of n with logits for every row measured 1.8× (n = 2) to 9× (n = 16) one
#: token; on a GPU the extra rows are nearly free. Calibration and then every round replace
#: these guesses with measurements.
PRIOR_BATCH_SLOPE = {"cpu": 0.8, "gpu": 0.05}

#: Batch sizes the calibration times (interpolated in between, extrapolated beyond).
CALIBRATION_SIZES = (1, 2, 4, 8, 16, 32)

#: A measurement this many times the current estimate is mostly a stall (another process,
#: a page fault): it moves the estimate as if it were this many times, no more.
STALL_FACTOR = 3.0


def damped(ms: float, estimate: float) -> float:
    """A measurement with a stall's excess cut off (see STALL_FACTOR)."""
    return min(ms, STALL_FACTOR * estimate)


def smoothed(old: float | None, ms: float, smoothing: float, *, damp: bool = True) -> float:
    """An exponentially smoothed estimate after one more measurement."""
    if old is None:
        return ms
    return old + smoothing * ((damped(ms, old) if damp else ms) - old)


@dataclass
class CostModel:
    """Measured costs of target passes, keyed by batch size; `target_ms(n)` is all a policy
    reads, so a measured table can stand in for it.

    Attributes:
        slope: prior relative cost of one more batch row (see PRIOR_BATCH_SLOPE).
        batch_ms: smoothed milliseconds per target pass, keyed by batch size n = K + 1.
        smoothing: weight of each new measurement.
    """

    slope: float
    batch_ms: dict[int, float] = field(default_factory=dict)
    smoothing: float = 0.2

    def seed(self, batch_ms: dict[int, float]) -> None:
        """Start from calibrated measurements instead of the prior shape.

        A smaller batch never costs more than a bigger one, and stalls only ever inflate a
        measurement, so each size is capped by every bigger size's cost.
        """
        running = float("inf")
        for n in sorted(batch_ms, reverse=True):
            running = min(running, batch_ms[n])
            self.batch_ms[n] = running

    def observe_batch(self, n: int, ms: float) -> None:
        self.batch_ms[n] = smoothed(self.batch_ms.get(n), ms, self.smoothing)

    def shape(self, n: int) -> float:
        """Prior cost of a pass over n tokens relative to one token."""
        return 1.0 + self.slope * (n - 1)

    def target_ms(self, n: int) -> float | None:
        """Estimated time of a target pass over n tokens (None before any measurement)."""
        if n in self.batch_ms:
            return self.batch_ms[n]
        if not self.batch_ms:
            return None
        below = [m for m in self.batch_ms if m < n]
        above = [m for m in self.batch_ms if m > n]
        if below and above:
            lo, hi = max(below), min(above)
            t_lo, t_hi = self.batch_ms[lo], self.batch_ms[hi]
            return t_lo + (t_hi - t_lo) * (n - lo) / (hi - lo)
        if below and len(self.batch_ms) > 1:
            # Beyond the largest size measured: go on at the cost per extra row seen over its
            # upper half (a batch's cost per row only falls with its size, so this errs high).
            hi = max(below)
            lo = max([m for m in below if m <= hi // 2] or [min(below)])
            per_row = max(0.0, (self.batch_ms[hi] - self.batch_ms[lo]) / (hi - lo))
            return self.batch_ms[hi] + per_row * (n - hi)
        anchor = max(below) if below else min(above)
        return self.batch_ms[anchor] * self.shape(n) / self.shape(anchor)
