"""Smoothing for costs learnt from real rounds, with stalls damped (see cost_table.py)."""

from __future__ import annotations

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
