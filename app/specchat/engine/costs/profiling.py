"""Measuring cost tables: one timed pass at a time, between answers, resumable."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from specchat.engine.costs.machine import MachineCosts
from specchat.engine.costs.store import CostStore
from specchat.engine.costs.table import (
    CATCHUP_ROWS,
    CONTEXT_TOKENS,
    DRAFT_SIZES,
    SLOPE_ROWS,
    SLOPE_SAMPLES,
    SLOPE_SPAN,
    CostTable,
)
from specchat.engine.llamacpp.model import LlamaModel
from specchat.engine.llamacpp.recurrent_state import Rollback


class DraftStep(Protocol):
    """What timing a draft head needs of it (engine/llamacpp's heads, a replay's record)."""

    @property
    def ready(self) -> bool: ...

    def draft(self, last: int, k: int, *, min_confidence: float = 0.0) -> list[int]: ...


#: Filler tokens cached per step while deepening the cache for the slope's deep pass: one
#: step stays a fraction of a second, so an answer never waits long for the measurement.
FILL_CHUNK = 64
#: Timed save-and-restore round trips of a recurrent state; the quickest is its cost.
CHECKPOINT_SAMPLES = 3

#: Cores' worth of CPU time other processes may use during a timed pass before the pass is
#: discarded: llama.cpp's threads wait on each other at every step, so one busy core can make
#: a pass on two many times slower (docs/costs.md).
BUSY_SHARE = 0.25
#: Discarded passes in a row after which the measurement waits for a later, quieter time.
BUSY_PASSES = 3
#: Seconds over which others' CPU time is judged: /proc/stat counts in 10 ms ticks, too
#: coarse for one short pass, so a pass is judged with the quarter second before it.
BUSY_WINDOW = 0.25
#: A one-token pass is timed after every measured pass: one slower than the measurement's
#: quickest by more than this share (plus DRIFT_SLACK_MS) means the machine slowed in a way
#: other processes' CPU time does not show (a neighbour on the same host, throttling), and
#: the pass before it is dropped as busy.
DRIFT = 0.3
#: Timer and scheduler noise on passes of a millisecond or two, which are not drift.
DRIFT_SLACK_MS = 5.0


def other_cpu_seconds() -> float:
    """CPU time used by every other process since boot (all cores, in seconds): the
    machine's busy time in /proc/stat less this process's own. 0 where /proc/stat is not
    readable (no busy check there)."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            fields = [int(v) for v in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle and iowait
    busy = (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")
    return busy - time.process_time()


def _filler(model: LlamaModel, count: int) -> list[int]:
    """Ordinary text tokens to stand in for a chat's context and a draft's rows."""
    text = (
        "def add(a, b):\n    return a + b\n\nThe quick brown fox jumps over the lazy dog. "
        "Speculative decoding checks several proposed tokens in one pass of the model.\n"
    )
    tokens = model.tokenize(text, add_special=False, parse_special=False) or [0]
    return (tokens * (1 + count // len(tokens)))[:count]


class TableMeasurer:
    """Measures a table one timed pass at a time, so it can stop between any two passes.

    Each pass is appended after the cache's contents and rolled back. With fewer than
    CONTEXT_TOKENS cached (right after a load), filler text is cached first and left there:
    the next answer's prompt sync drops it, and a conversation's own cache is never touched.

    Attributes:
        model: the model timed.
        table: the table filled in.
        logits: which rows' logits each pass asks for ('all' as verification does, 'last' as
            drafting does).
        catchup_rows: for a draft model, the tokens of one more pass that times its batched
            catch-up rate (0: none).
        slope: whether to time how a pass's cost grows with the cached context (the target:
            its long passes deep in a chat), after the sizes.
        load: CPU seconds other processes have used (see other_cpu_seconds): a pass during
            which (and BUSY_WINDOW before it) they used more than BUSY_SHARE of a core is
            discarded, as is one after which a one-token pass drifted (see DRIFT), and
            BUSY_PASSES of those in a row end this measurement for now.
        clock: the timer passes are timed with (seconds).
        postponed: whether the machine was too busy to go on (it resumes at the next load).
    """

    def __init__(
        self,
        model: LlamaModel,
        table: CostTable,
        *,
        logits: str = "all",
        catchup_rows: int = 0,
        slope: bool = False,
        load: Callable[[], float] | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.model = model
        self.load = load or other_cpu_seconds
        self.clock = clock
        self.postponed = False
        self._busy_run = 0
        self._quickest_one: float | None = None  # this run's quickest one-token pass (ms)
        self._readings: list[tuple[float, float]] = []  # (perf_counter, load) before passes
        self.table = table
        self.logits = logits
        self.catchup_rows = min(catchup_rows, model.n_batch)
        self.slope = slope
        self._warm = False
        self._slope_base: int | None = None  # where the cache was when a slope pair began
        self._slope_deep = 0  # how deep its second passes are timed
        self._slope_taken = 0  # passes it has timed

    @property
    def done(self) -> bool:
        if self.postponed:
            return True
        if self._slope_base is not None:
            return False  # a slope pair is under way: it ends by rolling the cache back
        rows = max(self.table.sizes[-1], self.catchup_rows)
        if self.model.room() <= rows + CONTEXT_TOKENS:
            return True
        return not self._sizes_owed and not self._slope_owed and not self._checkpoint_owed

    @property
    def _sizes_owed(self) -> bool:
        """Whether a size (or the draft model's catch-up rate) still wants a timed pass."""
        catchup_owed = self.catchup_rows > 1 and self.table.catchup_row_ms is None
        return not self.table.complete or catchup_owed

    @property
    def _checkpoint_owed(self) -> bool:
        return self.model.rollback is not Rollback.CACHE and self.table.checkpoint_ms is None

    def _time_checkpoint(self) -> None:
        """Time saving and restoring the recurrent state (best of CHECKPOINT_SAMPLES: stalls
        only ever slow it)."""
        model = self.model
        if model.n_past < CONTEXT_TOKENS:
            model.decode(_filler(model, CONTEXT_TOKENS - model.n_past), logits="none")
        times = []
        for _ in range(CHECKPOINT_SAMPLES):
            began = self.clock()
            model.checkpoint_round_trip()
            times.append((self.clock() - began) * 1000.0)
        self.table.checkpoint_ms = min(times)

    @property
    def _slope_owed(self) -> bool:
        return self.slope and self.table.slope_owed and self._slope_room() > 0

    def _slope_rows(self) -> int:
        return min(SLOPE_ROWS, self.table.sizes[-1])

    def _slope_room(self) -> int:
        """How much deeper than where a pair begins the deep pass can go (0: no room)."""
        base = max(self.model.n_past, CONTEXT_TOKENS)
        span = min(SLOPE_SPAN, self.model.n_ctx - base - self._slope_rows() - 1)
        return span if span >= SLOPE_SPAN // 4 else 0

    def step(self) -> int | None:
        """Time one pass of the next size owed; returns that size (None when done).

        Deepening the cache for the slope's deep pass takes a step per FILL_CHUNK tokens,
        which returns 0 (no pass timed).
        """
        if self.done:
            return None
        model = self.model
        if self._checkpoint_owed:
            self._time_checkpoint()
            return 0
        if not self._sizes_owed:
            return self._slope_step()
        if model.n_past < CONTEXT_TOKENS:
            model.decode(_filler(model, CONTEXT_TOKENS - model.n_past), logits="none")
        base = model.n_past
        if not self.table.samples:
            self.table.context_tokens = base  # the depth the table's times are for
        owed = self.table.to_measure()
        n = owed[0] if owed else self.catchup_rows
        elapsed = self._timed(n)
        if elapsed is None:
            return n
        if owed:
            # Timed deeper than the table's own depth (between answers of a long chat): what
            # the extra depth costs is taken off, once the slope is known.
            deeper = (self.table.slope_ms or 0.0) * self.table.depth_rows(n, base)
            self.table.record(n, elapsed - deeper)
        else:
            # A catch-up evaluates unseen text in one pass, as this one did.
            self.table.catchup_row_ms = elapsed / n
        return n

    def _slope_step(self) -> int:
        """One step of timing the slope: SLOPE_SAMPLES passes of SLOPE_ROWS where the cache
        is, filler cached a chunk at a time down to SLOPE_SPAN tokens deeper, as many passes
        there, and the cache rolled back to where it began. An answer in between drops the
        filler (see pause): the measurement then starts again later."""
        model = self.model
        rows = self._slope_rows()
        if self._slope_base is None:
            if model.n_past < CONTEXT_TOKENS:
                model.decode(_filler(model, CONTEXT_TOKENS - model.n_past), logits="none")
            self._slope_base = model.n_past
            self._slope_deep = self._slope_base + self._slope_room()
            self._slope_taken = 0
        if self._slope_taken < SLOPE_SAMPLES:
            self._record_slope(rows)
            return rows
        if model.n_past < self._slope_deep:
            chunk = min(FILL_CHUNK, self._slope_deep - model.n_past)
            model.decode(_filler(model, chunk), logits="none")
            return 0
        self._record_slope(rows)
        if self._slope_base is not None and self._slope_taken >= 2 * SLOPE_SAMPLES:
            model.truncate(self._slope_base)
            self._slope_base = None
        return rows

    def _record_slope(self, rows: int) -> None:
        elapsed = self._timed(rows)
        if elapsed is not None:
            self.table.record_slope(self.model.n_past, elapsed)
            self._slope_taken += 1
        elif self.postponed:
            self.pause()  # drops the filler and this pair's passes

    def _timed(self, n: int) -> float | None:
        """Milliseconds of one pass over n filler tokens after the cache, rolled back after
        (warmed first if an answer or a load came before); None when other processes were
        busy during it (see `load`) or a one-token pass after it drifted (see DRIFT)."""
        model = self.model
        rows = _filler(model, n)
        if not self._warm:
            self._warm_up(rows)
            self._warm = True
        self._readings.append((time.perf_counter(), self.load()))
        elapsed = self._pass_ms(rows)
        if self._busy(time.perf_counter()) or self._drifted(elapsed if n == 1 else None):
            self._busy_run += 1
            self.postponed = self._busy_run >= BUSY_PASSES
            return None
        self._busy_run = 0
        return elapsed

    def _warm_up(self, rows: list[int]) -> None:
        """One untimed pass, rolled back: the first after a load or an answer pages weights in."""
        model = self.model
        base = model.n_past
        model.decode(rows[:1], logits=self.logits)
        model.truncate(base)

    def _pass_ms(self, rows: list[int]) -> float:
        """Milliseconds of one pass over `rows` after the cache, rolled back after."""
        model = self.model
        base = model.n_past
        model.mark(len(rows))
        began = self.clock()
        model.decode(rows, logits=self.logits)
        ended = self.clock()
        model.truncate(base)
        return (ended - began) * 1000.0

    def _drifted(self, one_ms: float | None) -> bool:
        """Whether a one-token pass now (`one_ms`, or timed here) runs slower than this run's
        quickest by more than DRIFT. One clearly quicker than that means the passes before
        it ran slowed: their samples are taken again."""
        if one_ms is None:
            one_ms = self._pass_ms(_filler(self.model, 1))
        quickest = self._quickest_one
        if quickest is None or one_ms < quickest:
            if quickest is not None and one_ms * (1.0 + DRIFT) + DRIFT_SLACK_MS < quickest:
                self.table.samples.clear()
            self._quickest_one = one_ms
            return False
        return one_ms > quickest * (1.0 + DRIFT) + DRIFT_SLACK_MS

    def _busy(self, now: float) -> bool:
        """Whether others used more than BUSY_SHARE of a core since the latest reading at
        least BUSY_WINDOW old (or the oldest kept)."""
        readings = self._readings
        while len(readings) > 1 and readings[1][0] <= now - BUSY_WINDOW:
            readings.pop(0)
        since, load = readings[0]
        if now - since < BUSY_WINDOW:
            # The first pass of a measurement: wait until its window is long enough to judge.
            time.sleep(BUSY_WINDOW - (now - since))
            now = time.perf_counter()
        # /proc/stat counts in clock ticks: a tick or two of others' time is noise.
        slack = 2.0 / os.sysconf("SC_CLK_TCK")
        return self.load() - load > BUSY_SHARE * (now - since) + slack

    def run(
        self,
        *,
        should_stop: Callable[[], bool] = lambda: False,
        progress: Callable[[int, float], None] | None = None,
    ) -> bool:
        """Step until done or `should_stop()`; returns whether the table is complete.

        `progress(n, share)` follows each pass: the size just timed and the share done.
        """
        while not should_stop():
            n = self.step()
            if n is None:
                break
            if progress is not None:
                progress(n, self.table.progress)
        return self.table.complete

    def pause(self) -> None:
        """An answer comes next: its first pass pages weights in, so warm up again after.
        Drift is judged within one run: the machine may run at another pace by the next."""
        self._warm = False
        self._quickest_one = None
        if self._slope_base is not None:
            # A slope measurement under way: drop its filler and its passes (a slope is only
            # drawn from both depths of one measurement); it starts again later.
            self.model.truncate(min(self._slope_base, self.model.n_past))
            del self.table.slope_samples[len(self.table.slope_samples) - self._slope_taken :]
            self._slope_base = None


class HeadMeasurer(TableMeasurer):
    """Times a draft head's drafted token: one step of the head after the target's cache
    (a table of one size, measured and checked for a busy machine as any other).

    Attributes:
        head: the head timed (it follows `model`, the target, whose cache it drafts after).
    """

    def __init__(
        self,
        target: LlamaModel,
        head: DraftStep,
        table: CostTable,
        *,
        load: Callable[[], float] | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        super().__init__(target, table, load=load, clock=clock)
        self.head = head
        self._stuck = False

    @property
    def done(self) -> bool:
        return self._stuck or super().done

    @property
    def _checkpoint_owed(self) -> bool:
        return False  # the target's recurrent state is the target's table's to time

    def step(self) -> int | None:
        if self.done:
            return None
        model = self.model
        if model.n_past < CONTEXT_TOKENS:
            model.decode(_filler(model, CONTEXT_TOKENS - model.n_past), logits="none")
        if not self.head.ready:
            # It follows every decode of the target: a head that cannot draft after one
            # will not draft at all in this load.
            self._stuck = True
            return None
        return super().step()

    def _warm_up(self, rows: list[int]) -> None:
        self.head.draft(rows[0], 1)

    def _pass_ms(self, rows: list[int]) -> float:
        """Milliseconds of one step of the head: a draft of one token after the cache."""
        began = self.clock()
        self.head.draft(rows[0], 1)
        return (self.clock() - began) * 1000.0


def load_costs(
    target: LlamaModel,
    draft: LlamaModel | None,
    *,
    head_files: Mapping[str, Path] | None = None,
    store: CostStore | None = None,
) -> MachineCosts:
    """The stored tables of a loaded pair, its draft heads' included (`head_files`: the
    file each head's weights come from, by drafter; fresh, empty tables where none is
    stored): the drafters are built after, each pricing itself from its own."""
    store = store or CostStore()
    return MachineCosts(
        target=store.load(target),
        draft=None if draft is None else store.load(draft, rows=DRAFT_SIZES[-1]),
        heads=load_head_costs(target, head_files or {}, store=store),
    )


def load_head_costs(
    target: LlamaModel, head_files: Mapping[str, Path], *, store: CostStore
) -> dict[str, CostTable]:
    """The stored table of each draft head over `target`, by drafter (`head_files`: the file
    each head's weights come from; a fresh, empty table where none is stored)."""
    return {name: store.load_head(target, name, file) for name, file in head_files.items()}


class PairProfiler:
    """Fills a loaded pair's cost tables a pass at a time and stores them as they grow.

    The owner calls `step()` whenever nothing else is running (the window's worker between
    answers, `specchat models profile` in a loop) and `pause()` before an answer: a step is
    one pass (≈ 0.5 s at most on a laptop CPU), so an answer never waits longer than that.

    `retime`: time the drafters' stored prices again (a pair loaded for use; `specchat models
    profile` reads a stored table as it is, unless asked to measure it anew).

    Attributes:
        costs: the tables filled in (the same object the auto policy prices with).
        store: where they are saved.
    """

    def __init__(
        self,
        costs: MachineCosts,
        target: LlamaModel,
        draft: LlamaModel | None = None,
        *,
        heads: Mapping[str, DraftStep] | None = None,
        store: CostStore | None = None,
        load: Callable[[], float] | None = None,
        clock: Callable[[], float] = time.perf_counter,
        retime: bool = True,
    ) -> None:
        self.costs = costs
        self.store = store or CostStore()
        self._measurers = [TableMeasurer(target, costs.target, slope=True, load=load, clock=clock)]
        # A drafter's stored prices are timed again once a load of the pair for use (see
        # CostTable.retime); the target's one token is timed by `auto`'s first round, its
        # sizes by every drafter's rounds.
        if draft is not None and costs.draft is not None:
            if retime:
                costs.draft.retime()
            self._measurers.append(
                TableMeasurer(
                    draft,
                    costs.draft,
                    logits="last",
                    catchup_rows=CATCHUP_ROWS,
                    load=load,
                    clock=clock,
                )
            )
        # Each head the drafters draft with (by drafter) whose table the costs hold: a
        # drafted token's time is one step of the head, timed after the target's cache.
        for name, head in (heads or {}).items():
            if name in costs.heads:
                if retime:
                    costs.heads[name].retime()
                self._measurers.append(
                    HeadMeasurer(target, head, costs.heads[name], load=load, clock=clock)
                )

    @property
    def postponed(self) -> bool:
        """Whether the machine was too busy to measure (see TableMeasurer.load)."""
        return any(m.postponed for m in self._measurers)

    @property
    def done(self) -> bool:
        return all(m.done for m in self._measurers)

    @property
    def progress(self) -> float:
        """Share measured, weighted by the tables' sizes."""
        total = sum(len(m.table.sizes) for m in self._measurers)
        return sum(m.table.progress * len(m.table.sizes) for m in self._measurers) / total

    def step(self) -> int | None:
        """Time one pass; returns its size, or None when every table is done (and saved)."""
        for measurer in self._measurers:
            if not measurer.done:
                n = measurer.step()
                if measurer.done:
                    self.save()
                return n
        return None

    def pause(self) -> None:
        """An answer comes next: keep what was measured, warm up again when resuming."""
        for measurer in self._measurers:
            measurer.pause()
        self.save()

    def run(
        self,
        *,
        should_stop: Callable[[], bool] = lambda: False,
        progress: Callable[[int, float], None] | None = None,
    ) -> bool:
        """Step until done or `should_stop()`; returns whether every table is complete."""
        while not should_stop():
            n = self.step()
            if n is None:
                return True
            if progress is not None:
                progress(n, self.progress)
        self.pause()
        return self.done

    def save(self) -> None:
        """Store the tables (real rounds' refreshes included)."""
        for measurer in self._measurers:
            if measurer.table.key is not None:
                # A read-only or full cache only costs a re-measurement at the next load.
                with contextlib.suppress(OSError):
                    self.store.save(measurer.table)
