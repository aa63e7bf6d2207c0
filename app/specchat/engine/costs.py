"""Smoothing for costs learnt from real rounds, with stalls damped (see cost_table.py)."""

from __future__ import annotations

#: A measurement this many times the current estimate is mostly a stall (another process,
#: a page fault): it moves the estimate as if it were this many times, no more.
STALL_FACTOR = 3.0
#: A real round's time, brought to the usual pace (see Pace), moves its size's estimate as if
#: it were at most this many times the estimate: beyond, the pace has not caught up with a
#: slowdown yet (it follows one over a round or two), and the size is not to blame. Three
#: stalled rounds then raise one token's cost by 8 %, not 33 %.
OUTLIER = 1.5


def damped(ms: float, estimate: float) -> float:
    """A measurement with a stall's excess cut off (see STALL_FACTOR)."""
    return min(ms, STALL_FACTOR * estimate)


def smoothed(old: float | None, ms: float, smoothing: float, *, damp: bool = True) -> float:
    """An exponentially smoothed estimate after one more measurement."""
    if old is None:
        return ms
    return old + smoothing * ((damped(ms, old) if damp else ms) - old)


#: How far one round moves the pace toward its own ratio, and how much of the pace's
#: departure from 1 is still expected at the next round: a slowdown is followed within a
#: round or two, and one that persists moves into the sizes' own estimates (see Pace).
PACE_GAIN = 0.5
PACE_MEMORY = 0.7


class Pace:
    """How fast the machine runs right now against its cost tables: one factor for every
    pass size and both models, shared by the target's table and the draft model's.

    Another program busy on the same cores slows every pass at once. Learnt per size, a
    slowdown raises only the sizes that ran during it, and a size that then stops running
    keeps its inflated cost: plain's one-token pass, seen at 200–250 ms for two rounds on a
    2-core CPU, was priced at 129 ms for the rest of the answer, above a pass of 2 (95 ms);
    `auto` then drafted one token a round at a loss, since no plain round came to correct it
    (those rounds ran 0.65× plain). One factor for every size keeps the sizes' ratios, which
    decisions turn on, while the machine is slow; rounds of any size that run at their
    estimates bring it back. A departure that lasts ends up in the sizes' own estimates: the
    factor remembers only PACE_MEMORY of its departure from one round to the next.

    Attributes:
        factor: what passes take now over their estimates at the machine's usual pace.
    """

    def __init__(self) -> None:
        self.factor = 1.0

    def observe(self, ratio: float) -> None:
        """A round took `ratio` times its size's estimate at the usual pace (stalls damped)."""
        expected = 1.0 + PACE_MEMORY * (self.factor - 1.0)
        ratio = min(max(ratio, 1.0 / STALL_FACTOR), STALL_FACTOR)
        self.factor = expected + PACE_GAIN * (ratio - expected)
