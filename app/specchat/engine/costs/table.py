"""The machine's cost table: what a model's pass costs at every batch size, as shape × scale."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from typing import Any

import numpy as np

from specchat.engine.costs.key import CostKey
from specchat.engine.costs.priors import (
    CLIP,
    FLOOR,
    GAIN,
    PRIOR_CPU_SHAPE,
    PRIOR_GPU_ROW_SLOPE,
    SLOPE_FIT_SPREAD,
)

#: Largest target pass priced and measured: `auto` checks a long copy in passes this big.
MAX_ROWS = 64
#: Rows of a draft model's first pass in a round after a fully kept draft: its last token,
#: which the draft model drafted but never read, and the target's own.
FIRST_PASS_ROWS = 2
#: Sizes a draft model's table prices: a drafted token, and that first pass.
DRAFT_SIZES = (1, FIRST_PASS_ROWS)
#: Tokens of the pass that times a draft model's batched catch-up rate.
CATCHUP_ROWS = 64

#: Tokens in the cache before a timed pass: attention's share of a pass grows with the
#: context, and a chat's answers start after a system prompt and a question or more.
CONTEXT_TOKENS = 100

#: Cached tokens added before the passes that time how a pass's cost grows with the context:
#: long enough that the growth stands well above the timing noise (docs/costs.md).
SLOPE_SPAN = 2048
#: Timed passes at each depth (taken back to back: the best of them is the cost).
SLOPE_SAMPLES = 3
#: Rows of those passes: a pass's growth is attention over the cache, one row at a time, so
#: it scales with the rows; a big pass shows it clearest.
SLOPE_ROWS = 32

#: Sizes measured first, so that every size has a measured size at or above it after a
#: couple of seconds; the others fill in after.
COARSE_SIZES = (1, 2, 4, 8, 16, 32, 64)

#: Offline samples of a size that must agree before it counts as measured: a stall only ever
#: slows a pass, so the first sample may be one, and two that agree are the machine's cost.
SAMPLES = 2
#: Two samples agree when the slower is at most this share over the faster.
AGREE = 0.15
#: Samples of one size before the best of them stands as its cost, agreeing or not.
MAX_TRIES = 6


@functools.lru_cache(maxsize=512)
def prior_shape(n: int, *, gpu: bool) -> float:
    """Prior cost of a pass over n tokens relative to one token (see the two priors above)."""
    if gpu:
        return 1.0 + PRIOR_GPU_ROW_SLOPE * (n - 1)
    for (lo, lo_cost), (hi, hi_cost) in pairwise(PRIOR_CPU_SHAPE):
        if n <= hi:
            return lo_cost + (hi_cost - lo_cost) * (max(n, lo) - lo) / (hi - lo)
    last, last_cost = PRIOR_CPU_SHAPE[-1]
    return last_cost * n / last  # beyond the table: the largest pass's cost per row


class CostTableError(ValueError):
    """A cost table file is unreadable or malformed; the message says why."""


@dataclass
class CostTable:
    """One model's pass time by batch size on this machine: a shape times a scale.

    A pass over n tokens after `context` cached tokens is priced

        scale × pass_ms[n] / pass_ms[1]  +  slope_ms × n × (context − context_tokens) / 1000

    `pass_ms[n] / pass_ms[1]` is the shape (each size relative to one token), measured outside
    answers; `scale` is one token's time now, learnt from real plain rounds; the slope is
    attention over the cache, row by row. Every real round corrects its own size's figure (or
    the scale, for one token); plain rounds at several depths correct the slope; the
    corrected table is what gets stored.

    Attributes:
        sizes: the sizes that matter (1 … 64 for a target, 1 for a draft model).
        pass_ms: milliseconds of a pass over n tokens (logits for every row) after
            `context_tokens` cached tokens, by n: measured, then corrected by real rounds.
        samples: agreeing offline samples per size (a resumed measurement goes on from these).
        seen: real rounds seen per size: a pass is grown to a larger size only where real
            passes of that size have shown what it costs.
        gpu: whether the model runs on a GPU (picks the prior for sizes not measured yet).
        key: what the table is valid for (None for a table read from a file by name).
        description: the model, in words.
        context_tokens: cached tokens before the timed passes.
        catchup_row_ms: a draft model's time per token when it evaluates CATCHUP_ROWS tokens
            in one pass, as it catches up on text it has not seen (None: not measured, or not
            a draft model's table).
        slope_ms: what each row of a pass costs more per 1,000 tokens cached beyond
            `context_tokens` (attention reads the whole cache for every row). None: not
            measured yet (priced as no growth).
        slope_samples: (cached tokens, ms) of the passes of SLOPE_ROWS that time it, where
            the cache was when they began and SLOPE_SPAN tokens deeper.
        checkpoint_ms: a recurrent or hybrid model's time to save its recurrent state and put
            it back (see engine/llamacpp/recurrent_state.py): what dropping a rejected draft
            costs beyond evaluating the kept tokens again. None for an attention cache, or
            not measured yet.
        scale: one token's time now, learnt from real rounds of one token (None: as
            measured); never stored, the table is stored at it.
        tries: offline samples of each size taken this session (see MAX_TRIES); never
            stored.
        one_token_read: whether one token's time is as a file stored it, not yet timed in
            this process: stored at another session's scale (another moment's machine, or
            a server whose rounds shared the interpreter with its HTTP thread: 32 ms stored
            where this process times 27), it scales every price, so `auto` times it first.
        rescale_owed: whether the next offline sample rescales every size (see retime).
    """

    sizes: tuple[int, ...] = tuple(range(1, MAX_ROWS + 1))
    pass_ms: dict[int, float] = field(default_factory=dict)
    samples: dict[int, int] = field(default_factory=dict)
    seen: dict[int, int] = field(default_factory=dict)
    gpu: bool = False
    key: CostKey | None = None
    description: str = ""
    context_tokens: int = CONTEXT_TOKENS
    catchup_row_ms: float | None = None
    slope_ms: float | None = None
    slope_samples: list[tuple[int, float]] = field(default_factory=list)
    checkpoint_ms: float | None = None
    scale: float | None = field(default=None, compare=False)
    tries: dict[int, int] = field(default_factory=dict, compare=False, repr=False)
    one_token_read: bool = field(default=False, compare=False, repr=False)
    rescale_owed: bool = field(default=False, compare=False, repr=False)
    _plain: list[float] = field(default_factory=lambda: [0.0] * 5, compare=False, repr=False)
    _last_depth: dict[int, float] = field(default_factory=dict, compare=False, repr=False)
    _bases_kept: tuple[object, list[float | None]] | None = field(
        default=None, compare=False, repr=False
    )

    # --- prices ---------------------------------------------------------------------------
    @property
    def complete(self) -> bool:
        """Whether every size has its offline samples."""
        return not self.to_measure()

    def _factor(self) -> float:
        one = self.pass_ms.get(1)
        return self.scale / one if self.scale is not None and one else 1.0

    def depth_rows(self, n: int, context: int | None) -> float:
        """Rows × thousands of tokens cached beyond the table's depth: what the slope prices."""
        if context is None or context <= self.context_tokens:
            return 0.0
        return n * (context - self.context_tokens) / 1000.0

    def cost_ms(self, n: int, context: int | None = None) -> float | None:
        """A pass over exactly n tokens after `context` cached tokens (None: the table's own
        depth): measured, or a prior guess (None before any time)."""
        base = self._base_ms(n)
        if base is None:
            return None
        return base * self._factor() + (self.slope_ms or 0.0) * self.depth_rows(n, context)

    def _base_ms(self, n: int) -> float | None:
        ms = self.pass_ms.get(n)
        if ms is not None or not self.pass_ms:
            return ms
        # Nothing measured at n: the nearest measured size scaled by the prior's shape (a
        # partial table; and past the largest size, which `auto` prices every round).
        top = max(self.pass_ms)
        anchor = top if n >= top else min(self.pass_ms, key=lambda m: (abs(m - n), -m))
        return self.pass_ms[anchor] * self._shape(n) / self._shape(anchor)

    def _shape(self, n: int) -> float:
        return prior_shape(n, gpu=self.gpu)

    def drafted_token_ms(self, plain_ms: float | None, share: float) -> tuple[float, float]:
        """A draft model's or head's drafted token (its table's size 1): its price, and the
        price a probe of its drafter is judged by. Unmeasured, both are the prior: `share`
        of one target token (`plain_ms`; nothing before that is timed).

        A price read from a file, not yet timed in this process and above one target
        token's is judged for probing at the prior: a drafter's model or head is smaller than
        the target, so such a price was most likely stored stalled, and it would keep the
        drafter from every round and every probe, which are what would time it again (where
        the draft truly is slower, as on a CPU beside a GPU target, one probe shows it)."""
        prior = 0.0 if plain_ms is None else plain_ms / share
        ms = self.cost_ms(1)
        if ms is None:
            return prior, prior
        stalled = self.one_token_read and plain_ms is not None and ms > plain_ms
        return ms, min(ms, prior) if stalled else ms

    def pass_size(self, n: int, context: int | None = None, *, largest: int | None = None) -> int:
        """The size of the cheapest pass that holds n rows: n itself, or a larger size that
        real rounds have shown costs no more (the extra rows can carry more draft tokens,
        which can only add kept tokens), no larger than `largest` (the round's limit, where
        it has one). A measurement alone is no reason to pay for rows: a busy moment can make
        any size look cheap next to a stalled neighbour."""
        n = max(1, n)
        best, best_ms = n, self.cost_ms(n, context)
        if best_ms is None:
            return n
        top = self._top(largest)
        for m in self.seen:
            if n < m <= top:
                ms = self.cost_ms(m, context)
                if ms is not None and (ms < best_ms or (ms == best_ms and m > best)):
                    best, best_ms = m, ms
        return best

    def _top(self, largest: int | None) -> int:
        """The largest pass a larger one may stand in for: the table's largest size, or the
        round's limit where that is smaller."""
        top = self.sizes[-1]
        return top if largest is None else min(top, largest)

    def target_ms(
        self, n: int, context: int | None = None, *, largest: int | None = None
    ) -> float | None:
        """Time to check n tokens: the cheapest pass at or above n (see pass_size)."""
        return self.cost_ms(self.pass_size(n, context, largest=largest), context)

    def price_list(
        self, limit: int, context: int | None = None, *, largest: int | None = None
    ) -> list[float] | None:
        """`target_ms(n, context, largest=largest)` for n = 1 … `limit`, by index (index 0
        unused), in one backward pass: `auto` prices every draft length of every drafter
        each round."""
        if not self.pass_ms:
            return None
        prices = [0.0] * (limit + 1)
        top = self._top(largest)
        seen = [(m, self.cost_ms(m, context) or 0.0) for m in self.seen if limit < m <= top]
        best = min(seen, key=lambda s: (s[1], -s[0]), default=(0, math.inf))[1]
        bases, factor, slope = self._bases(limit), self._factor(), self.slope_ms or 0.0
        for n in range(limit, 0, -1):
            base = bases[n]
            own = 0.0 if base is None else base * factor + slope * self.depth_rows(n, context)
            prices[n] = min(own, best)
            if n in self.seen and n <= top:
                best = min(best, own)
        return prices

    def _bases(self, limit: int) -> list[float | None]:
        """`_base_ms(n)` for n = 0 … `limit`, kept while the measured passes stay as they
        are: auto prices every length each round, a plain round changes none of them, and
        working them out again cost ≈ 0.13 ms a round (replayed on the shipped CPU table)."""
        key = (limit, self.gpu, tuple(self.pass_ms.items()))
        if self._bases_kept is None or self._bases_kept[0] != key:
            self._bases_kept = (key, [None, *(self._base_ms(n) for n in range(1, limit + 1))])
        return self._bases_kept[1]

    # --- what real rounds teach -------------------------------------------------------------
    def observe(self, n: int, ms: float, context: int | None = None) -> None:
        """A pass of n rows took `ms` in a real round after `context` cached tokens: the
        size's own part of its price (all but the slope's) moves GAIN of the way toward what
        the round shows (a stall counted as CLIP times at most).

        One token's rounds move the scale (a quicker one sets it outright: stalls only ever
        slow a pass); another size's rounds move that size's own figure, so a size the
        measurement got wrong is re-priced by its own rounds, whatever the others did. Plain
        rounds at depths SLOPE_FIT_SPREAD apart set the slope (see _fit_slope).
        """
        self.seen[n] = self.seen.get(n, 0) + 1
        if n == 1:
            self.one_token_read = False
        x = self.depth_rows(n, context)
        self._last_depth[n] = x / n
        if n == 1:
            self._fit_slope(x, ms)
        price = self.cost_ms(n, context)
        growth = (self.slope_ms or 0.0) * x
        own = 0.0 if price is None else price - growth
        if own <= 0 or (n == 1 and 1 not in self.pass_ms):
            # Nothing of its price is the size's own yet: the round sets it.
            self.pass_ms[n] = ms
            if n == 1:
                self.scale = None
            return
        if n == 1 and growth and ms - growth < own / CLIP:
            # The slope alone priced more than the whole round: it was measured stalled. It
            # takes the round's excess over the scale, until plain rounds spread to fit it.
            self.slope_ms = max(0.0, ms - own) / x
            growth = self.slope_ms * x
        ratio = min(max((ms - growth) / own, 1.0 / CLIP), CLIP)
        step = ratio if n == 1 and ratio < 1.0 else ratio**GAIN
        if n == 1:
            self.scale = (self.scale or self.pass_ms[1]) * step
            return
        self.pass_ms[n] = (self._base_ms(n) or 0.0) * step
        if step != 1.0:
            self.check_shape()

    def _fit_slope(self, x: float, ms: float) -> None:
        """Add a plain round (`x`: thousands of tokens cached beyond the table's depth) to the
        line through plain rounds' times; once their depths spread, its slope is the table's.
        Each size keeps its price where it last ran: what its rounds showed stays shown."""
        sums = self._plain
        for i, value in enumerate((1.0, x, x * x, ms, x * ms)):
            sums[i] += value
        count, sx, sxx, st, sxt = sums
        spread = sxx / count - (sx / count) ** 2
        if spread < (SLOPE_FIT_SPREAD / 1000.0) ** 2:
            return
        slope = max(0.0, (sxt / count - sx / count * st / count) / spread)
        change, factor = (self.slope_ms or 0.0) - slope, self._factor()
        for m, depth in self._last_depth.items():
            if m in self.pass_ms:
                base = self.pass_ms[m] * (factor if m == 1 else 1.0)
                base = max(base + change * m * depth / (1.0 if m == 1 else factor), 0.05 * base)
                if m == 1:
                    self.scale = base
                else:
                    self.pass_ms[m] = base
        self.slope_ms = slope

    def check_shape(self) -> None:
        """Reprice and re-measure any size dearer than a larger one beyond FLOOR: it was
        measured stalled (a pass over fewer rows does part of the same work). A size real
        rounds have priced is left as they taught it, unless they taught it more than CLIP
        times a larger size's price: stalled rounds, each moving it up, priced it where
        `auto` never chooses it again, and so no round would ever bring it back.

        And no size costs more than the passes of a smaller size it splits into (see
        _cap_by_smaller_passes)."""
        self._cap_by_smaller_passes()
        cheapest, anchor = math.inf, 0
        for m in sorted(self.pass_ms, reverse=True):
            ms = self.pass_ms[m]
            taught = m in self.seen
            stalled = ms > CLIP * cheapest if taught else FLOOR * ms > cheapest
            if stalled and anchor:
                self.pass_ms[m] = self.pass_ms[anchor] * self._shape(m) / self._shape(anchor)
                if self.tries.get(m, 0) < MAX_TRIES:
                    self.samples.pop(m, None)
            else:
                anchor = m
            cheapest = min(cheapest, self.pass_ms[m])

    def _cap_by_smaller_passes(self) -> None:
        """Price no pass over m rows above m one-token passes, nor above ⌈m/k⌉ passes over k
        rows for a larger k beyond the curve's jaggedness (1 / FLOOR, as FLOOR bounds it the
        other way): a pass does the work of the smaller passes it splits into in one go, but
        kernels change with the batch size (a pass of 10 rows measured at 1.24 passes of 5).
        A size priced past that was measured or taught stalled, and a deep size priced so
        is one `auto` never chooses, so no round would correct it: it is held to the bound,
        and one past the jaggedness that no round has priced yet is measured again."""
        if len(self.pass_ms) < 2:
            return
        sizes = np.array(sorted(self.pass_ms))
        prices = np.array([self.pass_ms[int(n)] for n in sizes])
        chunks = -(-sizes[:, None] // sizes[None, :])  # ⌈m/k⌉ for every pair
        jagged = np.where(sizes[None, :] < sizes[:, None], chunks * prices / FLOOR, np.inf)
        bounds = np.where(sizes[None, :] == 1, jagged * FLOOR, jagged).min(axis=1)
        stalled = prices > jagged.min(axis=1)
        for m, ms, bound, retake in zip(sizes.tolist(), prices, bounds, stalled, strict=True):
            if ms > bound:
                self.pass_ms[m] = float(bound)
                if retake and m not in self.seen and self.tries.get(m, 0) < MAX_TRIES:
                    self.samples.pop(m, None)

    # --- what the offline measurement teaches ------------------------------------------------
    def record(self, n: int, ms: float) -> None:
        """An offline sample. The first, or one clearly quicker than those before (which were
        then slowed), sets the size; one that agrees with it confirms it; a slower one was
        stalled and is dropped. A sample of no time at all (a deep pass the slope priced
        whole: a slope measured stalled) says nothing of the size and is dropped too."""
        if ms <= 0:
            return
        if n == 1:
            self.one_token_read = False
        if self.rescale_owed and self.pass_ms.get(n):
            factor = ms / self.pass_ms[n]
            self.pass_ms = {m: price * factor for m, price in self.pass_ms.items()}
            if self.catchup_row_ms is not None:
                self.catchup_row_ms *= factor
        self.rescale_owed = False
        self.tries[n] = self.tries.get(n, 0) + 1
        old = self.pass_ms.get(n) if self.samples.get(n) else None
        if old is None or ms * (1.0 + AGREE) < old:
            self.pass_ms[n] = ms
            self.samples[n] = 1
            if n == 1:
                self.scale = None
        elif ms <= old * (1.0 + AGREE):
            self.pass_ms[n] = min(old, ms)
            self.samples[n] += 1
        if self.tries[n] >= MAX_TRIES:
            self.samples[n] = max(self.samples[n], SAMPLES)
        self.check_shape()

    def retime(self) -> None:
        """Its prices were read from a file: each size owes a sample taken in this process.
        The first one rescales every stored size, and a draft model's catch-up rate, alike
        (they were timed at another moment's pace, and sizes are judged against each other);
        each size's own sample then sets it (see record). For a drafter's table, which only
        the drafter's own rounds correct: a price stored dear (a busy spell, a second
        process computing beside it) keeps the drafter from every round, so no later session
        would ever time it again."""
        if self.one_token_read:
            self.samples.clear()
            self.rescale_owed = True

    @property
    def progress(self) -> float:
        """Share of the offline samples taken (0 … 1)."""
        owed = set(self.to_measure())
        taken = sum(
            SAMPLES if n not in owed else min(self.samples.get(n, 0), SAMPLES - 1)
            for n in self.sizes
        )
        return taken / (SAMPLES * len(self.sizes))

    def to_measure(self) -> list[int]:
        """Sizes still owed an offline sample, in the order they are taken: coarse sizes first
        (so every size soon has a measured one at or above it), then the rest; then each
        size's agreeing sample, in the same order."""
        order = [n for n in COARSE_SIZES if n in self.sizes]
        order += [n for n in self.sizes if n not in order]
        first = [n for n in order if self.samples.get(n, 0) < 1]
        return first or [n for n in order if self.samples.get(n, 0) < SAMPLES]

    @property
    def slope_owed(self) -> bool:
        """Whether the growth with the context still wants a sample (SLOPE_SAMPLES at each of
        two depths)."""
        return len(self.slope_samples) < 2 * SLOPE_SAMPLES

    def record_slope(self, context: int, ms: float) -> None:
        """A timed pass of SLOPE_ROWS after `context` cached tokens. The slope is the line
        through each depth's best time (stalls only ever slow a pass), per row and per 1,000
        cached tokens: attention grows linearly with the cache, row by row."""
        self.slope_samples.append((context, ms))
        best: dict[int, float] = {}
        for depth, sample in self.slope_samples:
            best[depth] = min(sample, best.get(depth, sample))
        if len(best) < 2:
            return
        mean_c = sum(best) / len(best)
        mean_ms = sum(best.values()) / len(best)
        spread = sum((c - mean_c) ** 2 for c in best)
        per_token = sum((c - mean_c) * (m - mean_ms) for c, m in best.items()) / spread
        rows = min(SLOPE_ROWS, self.sizes[-1])
        self.slope_ms = max(0.0, per_token * 1000.0 / rows)

    # --- files --------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The table at the scale real rounds have taught (exact times: which sizes are still
        owed a sample turns on comparing them)."""
        factor = self._factor()
        return {
            "description": self.description,
            "gpu": self.gpu,
            "context_tokens": self.context_tokens,
            "sizes": [self.sizes[0], self.sizes[-1]],
            "pass_ms": {str(n): ms * factor for n, ms in sorted(self.pass_ms.items())},
            "samples": {str(n): c for n, c in sorted(self.samples.items())},
            "seen": {str(n): c for n, c in sorted(self.seen.items())},
            "key": None if self.key is None else asdict(self.key),
            "catchup_row_ms": self.catchup_row_ms,
            "slope_ms": None if self.slope_ms is None else round(self.slope_ms, 4),
            "slope_samples": [[c, round(ms, 3)] for c, ms in self.slope_samples],
            "checkpoint_ms": self.checkpoint_ms,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, what: str = "cost table") -> CostTable:
        try:
            low, high = (int(v) for v in data.get("sizes", (1, MAX_ROWS)))
            pass_ms = {int(n): float(ms) for n, ms in data["pass_ms"].items()}
            samples = {int(n): int(c) for n, c in data.get("samples", {}).items()}
            seen = {int(n): int(c) for n, c in data.get("seen", {}).items()}
            key = CostKey(**data["key"]) if data.get("key") else None
            catchup = data.get("catchup_row_ms")
            catchup_row_ms = None if catchup is None else float(catchup)
            slope = data.get("slope_ms")
            slope_ms = None if slope is None else float(slope)
            slope_samples = [(int(c), float(ms)) for c, ms in data.get("slope_samples", [])]
            checkpoint = data.get("checkpoint_ms")
            checkpoint_ms = None if checkpoint is None else float(checkpoint)
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise CostTableError(f"{what}: malformed ({error!r})") from None
        if not 1 <= low <= high <= 4096:
            raise CostTableError(f"{what}: sizes {low}…{high} make no sense")
        bad = [n for n, ms in pass_ms.items() if not low <= n <= high or not ms > 0]
        if bad or (1 not in pass_ms and pass_ms):
            raise CostTableError(
                f"{what}: pass times need size 1 and positive milliseconds "
                f"for sizes {low}…{high} (bad: {bad[:5]})"
            )
        table = cls(
            sizes=tuple(range(low, high + 1)),
            pass_ms=pass_ms,
            samples=samples,
            seen={n: c for n, c in seen.items() if n in pass_ms and c > 0},
            gpu=bool(data.get("gpu", False)),
            key=key,
            description=str(data.get("description", "")),
            context_tokens=int(data.get("context_tokens", CONTEXT_TOKENS)),
            catchup_row_ms=catchup_row_ms if catchup_row_ms and catchup_row_ms > 0 else None,
            slope_ms=slope_ms if slope_ms is not None and slope_ms >= 0 else None,
            slope_samples=slope_samples,
            checkpoint_ms=checkpoint_ms
            if checkpoint_ms is not None and checkpoint_ms >= 0
            else None,
        )
        table.check_shape()  # a table stored before these checks existed is checked now
        table.one_token_read = 1 in pass_ms
        return table
