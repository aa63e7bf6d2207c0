"""The machine's cost table: a model's pass time at every batch size, measured outside answers."""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specchat.engine.costs import OUTLIER, STALL_FACTOR, Pace
from specchat.engine.price_list import price_list

if TYPE_CHECKING:
    # Only for annotations: the policy imports this module, and pricing needs no llama.cpp.
    from specchat.engine.llama import LlamaModel

#: Largest target pass priced and measured: `auto` checks a long copy in passes this big.
MAX_ROWS = 64
#: Tokens of the pass that times a draft model's batched catch-up rate.
CATCHUP_ROWS = 64

#: Tokens in the cache before a timed pass: attention's share of a pass grows with the
#: context, and a chat's answers start after a system prompt and a question or more.
CONTEXT_TOKENS = 100

#: Cached tokens added before the passes that time how a pass's cost grows with the context:
#: long enough that the growth stands well above the timing noise (a pass of 32 on the 1.5B
#: target on 2 cores: 269 ms after 100 cached tokens, 375 ms after 1,200; one pass in ten
#: runs 10 % slow on a shared machine, so a span of 1,024 left the slope ±50 % off).
SLOPE_SPAN = 2048
#: Timed passes at each depth (taken back to back: the best of them is the cost).
SLOPE_SAMPLES = 3
#: Rows of those passes: a pass's growth is attention over the cache, one row at a time, so
#: it scales with the rows; a big pass shows it clearest.
SLOPE_ROWS = 32

#: Timed passes per size: a stall (another process, a page fault) only ever makes a pass
#: slower, so the best of two is the machine's cost. Every size gets both, those a larger
#: size beats included: a stalled first sample is what makes a size look beaten (on the
#: 2-core server, 8 and 9 rows of Q4_K_M once timed at 11.2× and 10.7× one token, their
#: true 7.2× and 7.1×; next to each other, so neither stood out from its neighbours), and
#: a draft of 8 or 9 rows was then priced as a pass of 12 (8.3×).
SAMPLES = 2

#: Sizes measured first, so that every size has a measured size at or above it after a
#: couple of seconds; the others fill in after.
COARSE_SIZES = (1, 2, 4, 8, 16, 32, 64)

#: A pass over fewer rows never costs this many times a pass over more: it does part of the
#: same work, and kernel structure moves a size by a third at most (the dearest case measured:
#: Q8_0's 5 rows at 1.36 × its 8). A figure beyond it was measured while another program had
#: the cores (llama.cpp's threads wait on each other at every step, so sharing two cores can
#: make a pass 70 times slower): priced by it, a pass of 32 looked cheaper than one token.
IMPOSSIBLE = 2.0

#: Relative cost of one more row in a pass on a GPU before anything is measured: extra rows
#: are nearly free until the GPU is compute-bound.
PRIOR_GPU_ROW_SLOPE = 0.05

#: A CPU pass over n tokens (logits for every row) as a multiple of one token, before this
#: machine's sizes are measured: the powers of two measured for the 1.5B Q4_K_M target on a
#: 2-core CPU (resources/costs/cpu-2core-qwen1.5b-q4_k_m.json), linear in between. A row
#: costs less the bigger the pass, so a straight line through n = 2 would price a long copy
#: at twice its cost and keep `auto` from trying one until the table is measured.
PRIOR_CPU_SHAPE = ((1, 1.0), (2, 1.63), (4, 2.61), (8, 4.56), (16, 5.16), (32, 9.21), (64, 17.5))


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


#: Weight of a real round's time, at the usual pace, in its size's estimate: the pace follows
#: the machine round to round (see Pace), a size's own cost moves slowly, for a size that runs
#: only while the machine is slow keeps what it learnt then once it stops running.
SMOOTHING = 0.05
#: Weight of a new time in the draft model's catch-up estimate (learnt per token of text).
CATCHUP_SMOOTHING = 0.2

#: Weight of a real round in the drift: the machine's pace against its offline samples,
#: learnt from rounds of every size (about the last twenty).
DRIFT_SMOOTHING = 0.05
#: Bounds of the drift: a round off by more than this is a stall or a re-measurement's cue.
DRIFT_RANGE = (0.5, 3.0)

#: A real round this much faster than the offline time at its size means the offline
#: measurement was stalled: the table is measured again in the background.
SUSPECT = 0.6

SCHEMA = 1


@dataclass(frozen=True)
class CostKey:
    """What a table is valid for: one model file, backend, thread count and context band.

    Attributes:
        file: the model file's resolved path.
        size: its size in bytes.
        mtime_ns: its modification time (a rewritten file is another model).
        backend: 'CPU' or the GPU backend.
        threads: decode threads.
        ctx_band: the context window rounded up to a power of two (the KV cache's size
            changes attention kernels' shapes; nearby windows share a table).
    """

    file: str
    size: int
    mtime_ns: int
    backend: str
    threads: int
    ctx_band: int

    @classmethod
    def of(cls, model: LlamaModel) -> CostKey:
        path = Path(model.info.path).resolve()
        stat = path.stat()
        return cls(
            file=str(path),
            size=stat.st_size,
            mtime_ns=stat.st_mtime_ns,
            backend=model.info.backend,
            threads=model.info.n_threads,
            ctx_band=1 << max(0, math.ceil(math.log2(max(1, model.n_ctx)))),
        )

    def digest(self) -> str:
        text = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:20]


class CostTableError(ValueError):
    """A cost table file is unreadable or malformed; the message says why."""


@dataclass
class CostTable:
    """One model's pass time by batch size on this machine.

    Attributes:
        sizes: the sizes that matter (1 … 64 for a target, 1 for a draft model).
        pass_ms: milliseconds of a pass over n tokens (logits for every row), by n: measured
            outside answers, then refreshed by real rounds.
        samples: offline samples taken per size (a resumed measurement goes on from these).
        gpu: whether the model runs on a GPU (picks the prior for sizes not measured yet).
        key: what the table is valid for (None for a table read from a file by name).
        description: the model, in words.
        context_tokens: cached tokens before the timed passes.
        catchup_row_ms: a draft model's time per token when it evaluates CATCHUP_ROWS tokens
            in one pass, as it catches up on text it has not seen (None: not measured, or not
            a draft model's table).
        slope_ms: what each row of a pass costs more per 1,000 tokens cached beyond
            `context_tokens` (attention reads the whole cache for every row, so a pass of 32
            grows 32 times as fast as one token: deep in a chat a long pass costs more than
            `pass_ms` says). None: not measured yet (priced as no growth).
        slope_samples: (cached tokens, ms) of the passes of SLOPE_ROWS that time it, where
            the cache was when they began and SLOPE_SPAN tokens deeper.
        offline_ms: each size's best offline sample.
        fresh: the share of `pass_ms[n]` that is still the offline sample (1 when measured,
            shrinking as real rounds of that size refresh it).
        drift: what real rounds take over the offline samples of their size, smoothed over
            rounds of every size. The offline samples are each size's best pass, taken
            back to back; a real round also reads its logits and verifies, and the machine
            is not always as quiet. Plain rounds refresh one token's cost all the time while
            the sizes drafting uses are refreshed seldom, so without it one token would be
            priced at what rounds take and a pass of 8 at its best case: on a shared 2-core
            machine whose rounds ran 30 % over the samples, every draft looked that much
            cheaper than plain than it was. A size's offline share is priced at the drift.
        pace: how fast the machine runs right now (see Pace): every time the table gives is
            its estimate at the usual pace times this factor; shared with the draft model's
            table by MachineCosts, never stored.
    """

    sizes: tuple[int, ...] = tuple(range(1, MAX_ROWS + 1))
    pass_ms: dict[int, float] = field(default_factory=dict)
    samples: dict[int, int] = field(default_factory=dict)
    gpu: bool = False
    key: CostKey | None = None
    description: str = ""
    context_tokens: int = CONTEXT_TOKENS
    catchup_row_ms: float | None = None
    slope_ms: float | None = None
    slope_samples: list[tuple[int, float]] = field(default_factory=list)
    offline_ms: dict[int, float] = field(default_factory=dict)
    fresh: dict[int, float] = field(default_factory=dict)
    drift: float = 1.0
    pace: Pace = field(default_factory=Pace, compare=False, repr=False)

    # --- what the policy reads ----------------------------------------------------------------
    @property
    def complete(self) -> bool:
        """Whether every size has its offline samples."""
        return not self.to_measure()

    def cost_ms(self, n: int, context: int | None = None) -> float | None:
        """A pass over exactly n tokens after `context` cached tokens (None: the table's own
        context): measured, or a prior guess (None before any time)."""
        base = self._base_ms(n)
        return None if base is None else base + self.growth_ms(n, context)

    def growth_ms(self, n: int, context: int | None) -> float:
        """What a pass over n tokens costs more after `context` cached tokens than after the
        table's own context (negative for a shorter context; 0 where the slope is unknown)."""
        if context is None or not self.slope_ms:
            return 0.0
        return self.pace.factor * self.slope_ms * n * (context - self.context_tokens) / 1000.0

    def _timed_ms(self, n: int) -> float:
        """A timed size's cost now: its offline share priced at the drift (see `drift`)."""
        ms = self.pass_ms[n]
        share = self.fresh.get(n, 0.0)
        if share and self.drift != 1.0:
            ms += share * self.offline_ms.get(n, ms) * (self.drift - 1.0)
        return ms * self.pace.factor

    def _base_ms(self, n: int) -> float | None:
        if n in self.pass_ms:
            return self._timed_ms(n)
        if not self.pass_ms:
            return None
        # Nothing measured at n: the nearest measured size scaled by the prior's shape (a
        # partial table; and past the largest size, which `auto` prices every round).
        top = max(self.pass_ms)
        anchor = top if n >= top else min(self.pass_ms, key=lambda m: (abs(m - n), -m))
        return self._timed_ms(anchor) * self._shape(n) / self._shape(anchor)

    def pass_size(self, n: int, context: int | None = None) -> int:
        """The size of the cheapest pass that holds n rows: n itself or a larger size.

        The extra rows carry more draft tokens, which can only add kept tokens, so a pass is
        never sized where a larger one costs no more. Only sizes with a time (measured or seen)
        are candidates: a prior guess is no reason to pay for rows. Deep in a chat each extra
        row costs its attention over the cache too, which can make the larger pass dearer.
        """
        n = max(1, n)
        best, best_ms = n, self.cost_ms(n, context)
        if best_ms is None:
            return n
        for m in self.pass_ms:
            ms = self._timed_ms(m) + self.growth_ms(m, context)
            if m > n and m <= self.sizes[-1] and (ms < best_ms or (ms == best_ms and m > best)):
                best, best_ms = m, ms
        return best

    def target_ms(self, n: int, context: int | None = None) -> float | None:
        """Time to check n tokens: the cheapest pass at or above n (see pass_size)."""
        return self.cost_ms(self.pass_size(n, context), context)

    def price_list(self, limit: int, context: int | None = None) -> list[float] | None:
        """`target_ms(n, context)` for n = 1 … `limit`, by index (see price_list.py)."""
        return price_list(self, limit, context)

    def _shape(self, n: int) -> float:
        return prior_shape(n, gpu=self.gpu)

    # --- learning -----------------------------------------------------------------------------
    def record(self, n: int, ms: float) -> None:
        """An offline sample: the table keeps the best (stalls only ever slow a pass)."""
        old = self.pass_ms.get(n)
        self.pass_ms[n] = ms if old is None else min(old, ms)
        self.samples[n] = self.samples.get(n, 0) + 1
        self.offline_ms[n] = min(self.offline_ms.get(n, ms), ms)
        if self.pass_ms[n] == ms:
            self.fresh[n] = 1.0

    def observe(self, n: int, ms: float, context: int | None = None) -> None:
        """A pass seen in a real round after `context` cached tokens: moves the estimate a
        little, stalls damped. The table holds costs at its own context, so the round's
        attention over the rest of the cache is taken off first, and the time is brought to
        the machine's usual pace (see Pace)."""
        seen = max(ms - self.growth_ms(n, context), 0.05 * ms)
        ms = seen / self.pace.factor
        offline = self.offline_ms.get(n)
        if offline:
            over = min(ms / offline, STALL_FACTOR * self.drift)
            over = min(max(over, DRIFT_RANGE[0]), DRIFT_RANGE[1])
            self.drift += DRIFT_SMOOTHING * (over - self.drift)
        old = self.pass_ms.get(n)
        self.fresh[n] = self.fresh.get(n, 0.0) * (1.0 - SMOOTHING) if old is not None else 0.0
        if old is None:
            # A first real time at this size beats a guess, but a stall must not set it.
            guess = self.cost_ms(n)
            nominal = None if guess is None else guess / self.pace.factor
            self.pass_ms[n] = ms if nominal is None else min(ms, STALL_FACTOR * nominal)
            return
        if self.samples.get(n) and seen < SUSPECT * old:
            # A real round beat the offline time by far (as it ran, not at the pace, which
            # lags a slowdown's end): that measurement was stalled. Take the round's time and
            # measure every size again in the background; record() keeps each size's best.
            self.pass_ms[n] = seen
            self.fresh[n] = 0.0
            self.drift = self.pace.factor = 1.0  # paces against stalled samples say nothing
            self.samples.clear()
            return
        self.pass_ms[n] = old + SMOOTHING * (min(ms, OUTLIER * old) - old)
        self._drop_impossible(n, ms)

    def _drop_impossible(self, n: int, ms: float) -> None:
        """A real pass of n rows took `ms` (at the usual pace): a smaller size priced beyond
        IMPOSSIBLE times that was measured stalled. Rounds at the long passes it makes look
        cheap would never correct it, so it is priced from this round by the prior's shape,
        its stalled sample is dropped, and the table is measured again in the background."""
        stalled = [m for m in range(self.sizes[0], n) if self.pass_ms.get(m, 0) > IMPOSSIBLE * ms]
        for m in stalled:
            self.pass_ms[m] = ms * self._shape(m) / self._shape(n)
            self.offline_ms.pop(m, None)
            self.fresh[m] = 0.0
        if stalled:
            self.samples.clear()

    def observe_pace(self, n: int, ms: float, context: int | None = None) -> None:
        """Let a real round's time over its size's estimate move the pace (see Pace); call
        before `observe`, which then learns the size's cost from the round at the new pace."""
        estimate = self.cost_ms(n, context)
        if estimate:
            self.pace.observe(ms * self.pace.factor / estimate)

    @property
    def progress(self) -> float:
        """Share of the offline samples taken (0 … 1; a skipped second sample counts as taken)."""
        owed = set(self.to_measure())
        taken = sum(
            SAMPLES if n not in owed and n in self.samples else min(self.samples.get(n, 0), 1)
            for n in self.sizes
        )
        return taken / (SAMPLES * len(self.sizes))

    def to_measure(self) -> list[int]:
        """Sizes still owed an offline sample, in the order they are taken.

        Coarse sizes first (so every size soon has a measured one at or above it), then the
        rest; then each size's second sample, in the same order.
        """
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
        return {
            "description": self.description,
            "gpu": self.gpu,
            "context_tokens": self.context_tokens,
            "sizes": [self.sizes[0], self.sizes[-1]],
            # Times stay exact: which sizes are still owed a sample turns on comparing them
            # (see to_measure), and a tiny model's 0.3 ms pass rounded to 3 decimals moved by
            # enough to turn a table that was complete when saved incomplete when loaded.
            "pass_ms": {str(n): ms for n, ms in sorted(self.pass_ms.items())},
            "samples": {str(n): c for n, c in sorted(self.samples.items())},
            "key": None if self.key is None else asdict(self.key),
            "catchup_row_ms": self.catchup_row_ms,
            "slope_ms": None if self.slope_ms is None else round(self.slope_ms, 4),
            "slope_samples": [[c, round(ms, 3)] for c, ms in self.slope_samples],
            "offline_ms": {str(n): ms for n, ms in sorted(self.offline_ms.items())},
            "fresh": {str(n): round(f, 4) for n, f in sorted(self.fresh.items())},
            "drift": round(self.drift, 4),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, what: str = "cost table") -> CostTable:
        try:
            low, high = (int(v) for v in data.get("sizes", (1, MAX_ROWS)))
            pass_ms = {int(n): float(ms) for n, ms in data["pass_ms"].items()}
            samples = {int(n): int(c) for n, c in data.get("samples", {}).items()}
            key = CostKey(**data["key"]) if data.get("key") else None
            catchup = data.get("catchup_row_ms")
            catchup_row_ms = None if catchup is None else float(catchup)
            slope = data.get("slope_ms")
            slope_ms = None if slope is None else float(slope)
            slope_samples = [(int(c), float(ms)) for c, ms in data.get("slope_samples", [])]
            offline_ms = {int(n): float(ms) for n, ms in data.get("offline_ms", {}).items()}
            fresh = {int(n): float(f) for n, f in data.get("fresh", {}).items()}
            drift = float(data.get("drift", 1.0))
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
        return cls(
            sizes=tuple(range(low, high + 1)),
            pass_ms=pass_ms,
            samples=samples,
            gpu=bool(data.get("gpu", False)),
            key=key,
            description=str(data.get("description", "")),
            context_tokens=int(data.get("context_tokens", CONTEXT_TOKENS)),
            catchup_row_ms=catchup_row_ms if catchup_row_ms and catchup_row_ms > 0 else None,
            slope_ms=slope_ms if slope_ms is not None and slope_ms >= 0 else None,
            slope_samples=slope_samples,
            offline_ms={n: ms for n, ms in offline_ms.items() if ms > 0},
            fresh={n: min(max(f, 0.0), 1.0) for n, f in fresh.items()},
            drift=min(max(drift, DRIFT_RANGE[0]), DRIFT_RANGE[1]),
        )


def estimate_catchup_ms(tokens: int, per_token_ms: float | None, draft: CostTable | None) -> float:
    """Estimated time for a draft model to evaluate `tokens` it has not seen, at a learnt
    `per_token_ms` (None before any catch-up was timed), else at the batched rate its
    `draft` table measured."""
    if tokens <= 2:
        return 0.0  # the usual one or two: part of every draft round's cost
    if per_token_ms is None and draft is not None:
        per_token_ms = draft.catchup_row_ms
        if per_token_ms is None:
            # Before measuring: a batched catch-up costs a fraction of decoding token by token.
            per_token_ms = 0.3 * (draft.cost_ms(1) or 0.0)
    return (per_token_ms or 0.0) * tokens


@dataclass
class MachineCosts:
    """What `auto` prices a round with: the target's table, the draft's, and catch-up.

    Attributes:
        target: the target model's pass times by size.
        draft: the draft model's (size 1: one drafted token), if there is a draft model.
        catchup_token_ms: milliseconds per token when the draft model evaluates text it has
            not seen in one batch (learnt from rounds; a share of a drafted token before).
        name: what machine the costs describe (for tables read from a file).
        sources: where the figures come from (for tables read from a file).
        context: tokens in the target's cache before the next pass (set each round by whoever
            runs the rounds): target passes are priced, and rounds learnt from, at this depth.
    """

    target: CostTable
    draft: CostTable | None = None
    catchup_token_ms: float | None = None
    name: str = ""
    sources: tuple[str, ...] = ()
    context: int | None = None

    def __post_init__(self) -> None:
        if self.draft is not None:
            self.draft.pace = self.target.pace  # one machine: one pace (see Pace)

    def target_ms(self, n: int) -> float | None:
        """Time to check n tokens in one target pass (the cheapest pass holding them)."""
        return self.target.target_ms(n, self.context)

    def price_list(self, limit: int) -> list[float] | None:
        """`target_ms(n)` for n = 1 … `limit`, by index (see CostTable.price_list)."""
        return self.target.price_list(limit, self.context)

    def pass_size(self, n: int) -> int:
        """Rows of the pass that checks n tokens (n, or a larger size that costs no more)."""
        return self.target.pass_size(n, self.context)

    def cost_ms(self, n: int) -> float | None:
        """A target pass over exactly n tokens (see CostTable.cost_ms)."""
        return self.target.cost_ms(n, self.context)

    @property
    def draft_token_ms(self) -> float | None:
        return None if self.draft is None else self.draft.cost_ms(1)

    def catchup_ms(self, tokens: int) -> float:
        """Estimated time for the draft model to evaluate `tokens` it has not seen."""
        return estimate_catchup_ms(tokens, self.catchup_token_ms, self.draft)

    @property
    def batch_ms(self) -> dict[int, float]:
        """The target's pass times by size (the table itself: updating it pins costs)."""
        return self.target.pass_ms

    @batch_ms.setter
    def batch_ms(self, pass_ms: Mapping[int, float]) -> None:
        self.target.pass_ms = {int(n): float(ms) for n, ms in pass_ms.items()}

    def seed(self, batch_ms: Mapping[int, float], draft_token_ms: float | None = None) -> None:
        """Pin target pass times (and a draft token's) as if measured: for tests and tools."""
        self.target.pass_ms.update({int(n): float(ms) for n, ms in batch_ms.items()})
        if draft_token_ms is not None:
            if self.draft is None:
                self.draft = CostTable(sizes=(1,), gpu=self.target.gpu, pace=self.target.pace)
            self.draft.pass_ms[1] = float(draft_token_ms)

    def observe_batch(self, n: int, ms: float) -> None:
        self.target.observe_pace(n, ms, self.context)
        self.target.observe(n, ms, self.context)

    def observe_draft(self, tokens: int, ms: float) -> None:
        if tokens > 0 and self.draft is not None:
            self.draft.observe(1, ms / tokens)

    def observe_catchup(self, tokens: int, ms: float) -> None:
        if tokens <= 0:
            return
        per_token = ms / tokens
        old = self.catchup_token_ms
        self.catchup_token_ms = (
            per_token if old is None else old + CATCHUP_SMOOTHING * (min(per_token, 3 * old) - old)
        )

    # --- machine cost files (shipped profiles, `profile --out`, `bench --replay --costs`) ---
    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "name": self.name,
            "sources": list(self.sources),
            "target": self.target.to_json(),
            "draft": None if self.draft is None else self.draft.to_json(),
            "catchup_token_ms": self.catchup_token_ms,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, what: str = "cost file") -> MachineCosts:
        if not isinstance(data, Mapping) or data.get("schema") != SCHEMA:
            raise CostTableError(f"{what}: not a SpecChat cost file (schema {SCHEMA})")
        if not isinstance(data.get("target"), Mapping):
            raise CostTableError(f"{what}: no target table")
        target = CostTable.from_json(data["target"], what=f"{what} (target)")
        if 1 not in target.pass_ms:
            raise CostTableError(f"{what}: the target table has no pass of 1 token")
        draft = None
        if isinstance(data.get("draft"), Mapping):
            draft = CostTable.from_json(data["draft"], what=f"{what} (draft)")
        catchup = data.get("catchup_token_ms")
        return cls(
            target=target,
            draft=draft,
            catchup_token_ms=None if catchup is None else float(catchup),
            name=str(data.get("name", "")),
            sources=tuple(str(s) for s in data.get("sources", ())),
        )

    @classmethod
    def read(cls, path: Path) -> MachineCosts:
        """A cost file, with a clear message for a missing or malformed one."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as error:
            raise CostTableError(f"cannot read {path}: {error.strerror or error}") from None
        except ValueError as error:
            raise CostTableError(f"{path} is not JSON: {error}") from None
        return cls.from_json(data, what=str(path))
