"""The cost table: rounding passes up to cheaper sizes, measuring between answers, storing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from specchat.engine.costs.machine import MachineCosts
from specchat.engine.costs.priors import CLIP, FLOOR, GAIN
from specchat.engine.costs.profiling import PairProfiler, TableMeasurer, load_costs
from specchat.engine.costs.store import CostStore
from specchat.engine.costs.table import (
    CATCHUP_ROWS,
    COARSE_SIZES,
    MAX_ROWS,
    MAX_TRIES,
    CostKey,
    CostTable,
    CostTableError,
)
from specchat.engine.llamacpp.model import LlamaModel

#: The shipped Q4_K_M target's pass cost on a 2-core CPU, × one token (issue figures).
Q4_K_M = {1: 1.0, 2: 1.63, 3: 2.06, 4: 2.61, 5: 3.38, 8: 4.56, 12: 5.74, 15: 6.82, 16: 5.16}


def quiet() -> float:
    """No other process uses the CPU (the busy check is tested on its own)."""
    return 0.0


def jagged(relative: dict[int, float] = Q4_K_M, one_ms: float = 28.0) -> CostTable:
    """A table measured at every size 1 … 16, filled in linearly between the given points,
    every size seen in real rounds."""
    points = sorted(relative)
    pass_ms = {}
    for n in range(1, 17):
        lo = max(p for p in points if p <= n)
        hi = min(p for p in points if p >= n)
        r = (
            relative[lo]
            if lo == hi
            else relative[lo] + (relative[hi] - relative[lo]) * (n - lo) / (hi - lo)
        )
        pass_ms[n] = r * one_ms
    return CostTable(sizes=tuple(range(1, 17)), pass_ms=pass_ms, seen=dict.fromkeys(pass_ms, 1))


def test_a_pass_is_never_sized_where_a_larger_one_costs_less() -> None:
    table = jagged()
    # 16 costs less than every size from 11 on: those are checked in a pass of 16.
    for n in range(11, 17):
        assert table.pass_size(n) == 16
        assert table.target_ms(n) == pytest.approx(5.16 * 28.0)
    for n in range(1, 17):
        size = table.pass_size(n)
        assert size >= n
        assert all(table.pass_ms[m] > table.pass_ms[size] for m in range(size + 1, 17))
    assert table.pass_size(4) == 4  # cheaper than anything bigger: no rounding


def test_q4_0_shape_rounds_three_up_to_four() -> None:
    table = jagged({1: 1.0, 2: 1.67, 3: 2.25, 4: 1.76, 8: 2.99, 15: 5.5, 16: 4.14})
    assert table.pass_size(3) == 4
    assert table.pass_size(2) == 2
    assert table.pass_size(12) == 16
    assert table.target_ms(3) == table.pass_ms[4]


def test_partial_table_prices_from_neighbours_and_rounds_only_to_measured_sizes() -> None:
    table = CostTable(pass_ms={1: 30.0, 16: 150.0})
    assert table.cost_ms(15) is not None and table.cost_ms(15) < 150.0  # prior shape
    assert table.pass_size(15) == 15  # a guess is no reason to pay for more rows
    table.pass_ms[15] = 200.0
    assert table.pass_size(15) == 15  # 16 was only measured: that is no reason either
    table.observe(16, 150.0)  # once a real pass of 16 showed its cost, 15 rounds up
    assert table.pass_size(15) == 16
    assert CostTable().target_ms(3) is None


def test_a_real_round_moves_its_own_size_and_a_stall_moves_it_by_two_at_most() -> None:
    table = CostTable(pass_ms={1: 50.0, 2: 70.0, 4: 80.0})
    table.observe(2, 84.0)
    assert table.pass_ms[2] == pytest.approx(70.0 * (84.0 / 70.0) ** GAIN)
    assert table.cost_ms(1) == 50.0 and table.cost_ms(4) == 80.0  # others keep their prices
    table.observe(4, 80_000.0)  # another process stole the CPU for a while
    assert table.pass_ms[4] == pytest.approx(80.0 * CLIP**GAIN)
    table.observe(4, 80_000.0)  # and again: never above four one-token passes
    assert table.pass_ms[4] == pytest.approx(4 * 50.0)
    table.observe(7, 9000.0)  # first real time at an unmeasured size: priced, then moved
    assert table.pass_ms[7] < 9000.0 and table.seen[7] == 1


def test_one_token_rounds_move_the_scale_and_with_it_every_price() -> None:
    """The machine runs 30 % slower than it measured (on battery, or the table was measured
    on a quiet moment): plain rounds show it, and every size is priced 30 % dearer, so
    drafting does not look cheaper against plain than it is."""
    table = jagged()
    before = {n: table.cost_ms(n) for n in table.sizes}
    for _ in range(12):
        table.observe(1, 1.3 * 28.0)
    for n in table.sizes:
        assert table.cost_ms(n) == pytest.approx(1.3 * before[n], rel=0.01)
    # A quicker plain round sets the scale outright: stalls only ever slow a pass.
    table.observe(1, 25.0)
    assert table.cost_ms(1) == pytest.approx(25.0)
    assert table.cost_ms(8) == pytest.approx(before[8] * 25.0 / 28.0)


def test_a_size_the_measurement_got_wrong_is_repriced_by_its_rounds_within_a_few() -> None:
    """A pass of 2 stored at 0.98× one token (its true 1.63×: one token was timed slow): each
    round of 2 brings its price halfway to what it took."""
    table = jagged()
    table.pass_ms[2] = 0.98 * 28.0
    rounds = 0
    while table.cost_ms(2) < 0.95 * 1.63 * 28.0:
        table.observe(2, 1.63 * 28.0)
        rounds += 1
    assert rounds <= 4


def test_the_corrected_table_is_stored_at_the_scale_rounds_taught() -> None:
    table = jagged()
    for _ in range(12):
        table.observe(1, 2 * 28.0)
    table.observe(4, 2 * 2.61 * 28.0 * 1.5)
    back = CostTable.from_json(json.loads(json.dumps(table.to_json())))
    for n in table.sizes:
        assert back.cost_ms(n) == pytest.approx(table.cost_ms(n), rel=1e-9)
    assert back.seen == table.seen


def test_a_slower_offline_sample_is_a_stall_and_a_much_quicker_one_replaces_the_rest() -> None:
    table = CostTable(sizes=(1, 2))
    table.record(1, 40.0)
    table.record(2, 60.0)
    assert table.to_measure() == [1, 2]  # each owes an agreeing sample
    table.record(1, 90.0)  # a stall: dropped
    assert table.pass_ms[1] == 40.0 and table.samples[1] == 1
    table.record(1, 30.0)  # far quicker: the first was slowed, this one counts alone
    assert table.pass_ms[1] == 30.0 and table.samples[1] == 1
    table.record(1, 31.0)  # agrees
    table.record(2, 500.0)  # a stall never undoes a better time, nor counts as agreeing
    assert table.pass_ms[2] == 60.0 and table.to_measure() == [2]
    table.record(2, 58.0)
    assert table.complete and table.pass_ms == {1: 30.0, 2: 58.0}


def test_a_smaller_pass_timed_far_dearer_than_a_larger_one_is_priced_from_it_and_retaken() -> None:
    table = CostTable(sizes=(1, 2))
    table.record(1, 190.0)  # measured while another process held the CPU
    table.record(2, 60.0)
    assert table.pass_ms[1] < 60.0 and table.to_measure() == [1]


def test_measurement_order_is_coarse_first_then_every_size_twice() -> None:
    table = CostTable()
    assert table.to_measure()[: len(COARSE_SIZES)] == list(COARSE_SIZES)
    for n, ms in jagged().pass_ms.items():
        table.record(n, ms)
    for n in range(17, MAX_ROWS + 1):
        table.record(n, 150.0 + 10 * n)
    second = table.to_measure()
    assert second[: len(COARSE_SIZES)] == list(COARSE_SIZES)
    assert sorted(second) == list(range(1, MAX_ROWS + 1))  # 14, beaten by 16, included


def test_adjacent_stalled_sizes_get_their_second_sample() -> None:
    """Two neighbouring sizes stalled on their first sample look beaten by the larger sizes
    after them and stand out from neither neighbour (Q4_K_M on the 2-core server: 8 and 9
    rows at 11.2× and 10.7× one token, their true 7.2× and 7.3×). Priced so, a draft that
    wants 8 rows is sent to a pass of 12 (8.3×); the second sample sets both right."""
    ratios = (1.0, 1.9, 2.2, 3.4, 3.4, 4.1, 4.7, 7.2, 7.3, 8.4, 8.35, 8.3)
    true = {n: 50.0 * ratio for n, ratio in enumerate(ratios, start=1)}
    table = CostTable(sizes=tuple(true))
    for n, ms in true.items():
        table.record(n, {8: 50.0 * 11.2, 9: 50.0 * 10.7}.get(n, ms))
    table.seen = dict.fromkeys(true, 1)
    assert table.pass_ms[8] > true[8] and table.pass_ms[9] > true[9]
    while table.to_measure():
        n = table.to_measure()[0]
        table.record(n, true[n])
    assert table.complete and table.pass_ms == true
    assert table.pass_size(8) == 8 and table.target_ms(8) == true[8]


def test_table_files_round_trip_and_bad_files_are_clear(tmp_path: Path) -> None:
    costs = MachineCosts(jagged(), CostTable(sizes=(1,), pass_ms={1: 9.0}), name="laptop")
    path = tmp_path / "costs.json"
    path.write_text(json.dumps(costs.to_json()))
    back = MachineCosts.read(path)
    assert back.target.pass_ms == pytest.approx(costs.target.pass_ms, abs=1e-3)
    assert back.draft_token_ms == 9.0 and back.name == "laptop"
    path.write_text('{"schema": 1, "target": {"pass_ms": {"2": 5}}}')
    with pytest.raises(CostTableError, match="size 1"):
        MachineCosts.read(path)
    path.write_text("not json")
    with pytest.raises(CostTableError, match="not JSON"):
        MachineCosts.read(path)
    with pytest.raises(CostTableError, match="cannot read"):
        MachineCosts.read(tmp_path / "missing.json")


def test_measuring_fills_every_size_and_leaves_a_conversation_cache_alone(
    tiny_target: LlamaModel,
) -> None:
    tiny_target.reset()
    conversation = tiny_target.tokenize("hello there " * 60)
    tiny_target.decode(conversation, logits="none")
    held = list(tiny_target.tokens)
    assert len(held) >= 100
    table = CostTable(sizes=tuple(range(1, 17)))
    TableMeasurer(tiny_target, table, load=quiet).run()
    assert table.complete
    assert sorted(table.pass_ms) == list(range(1, 17))
    # Two agreeing samples each, or the best of MAX_TRIES (a busy test machine).
    assert all(table.samples[n] >= 2 and table.tries[n] <= MAX_TRIES for n in table.sizes)
    assert tiny_target.tokens == held


def test_measurement_stops_when_an_answer_comes_and_resumes_from_disk(
    tiny_target: LlamaModel, tiny_draft: LlamaModel, tmp_path: Path
) -> None:
    tiny_target.reset()
    tiny_draft.reset()
    store = CostStore(tmp_path / "costs")
    costs = load_costs(tiny_target, tiny_draft, store=store)
    profiler = PairProfiler(costs, tiny_target, tiny_draft, store=store, load=quiet)
    steps: list[int] = []
    stopped = profiler.run(
        should_stop=lambda: len(steps) >= 5, progress=lambda n, share: steps.append(n)
    )
    assert not stopped
    assert steps[:2] == [1, 2] and set(steps) <= set(COARSE_SIZES)
    # Paused: what was measured is on disk, and a later load resumes there.
    again = load_costs(tiny_target, tiny_draft, store=store)
    assert again.target.pass_ms == costs.target.pass_ms
    assert again.target.samples == costs.target.samples
    resumed = PairProfiler(again, tiny_target, tiny_draft, store=store, load=quiet)
    owed = again.target.to_measure()
    assert owed
    assert resumed.step() == owed[0]
    assert resumed.run()
    assert again.target.complete and again.draft is not None and again.draft.complete
    final = load_costs(tiny_target, tiny_draft, store=store)
    assert final.target.complete and final.draft is not None and final.draft.complete
    assert final.draft_token_ms is not None
    # The draft model's batched catch-up rate is measured too, and kept on disk. (Whether a
    # row of it costs less than a token is the machine's business: one timed pass of a tiny
    # model, and a stall on a busy machine made it cost twice as much.)
    catchup = final.draft.catchup_row_ms
    assert catchup is not None and catchup > 0
    assert final.catchup_ms(100) == pytest.approx(100 * catchup)
    # A later load owes the target nothing; the draft model's prices are timed again.
    reloaded = PairProfiler(final, tiny_target, tiny_draft, store=store, load=quiet)
    assert final.target.complete and reloaded.step() == 1 and reloaded.run()


def test_a_draft_price_stored_dear_is_timed_again_at_the_next_load(
    tiny_target: LlamaModel, tiny_draft: LlamaModel, tmp_path: Path
) -> None:
    """Only the draft model's own rounds correct its stored price, and a price stored
    dear keeps it from every round: each load's measurement times it again and takes what
    it times, slower or quicker than what was stored."""
    store = CostStore(tmp_path / "costs")
    costs = load_costs(tiny_target, tiny_draft, store=store)
    assert PairProfiler(costs, tiny_target, tiny_draft, store=store, load=quiet).run()
    assert costs.draft is not None
    timed = dict(costs.draft.pass_ms)
    for factor in (20.0, 0.05):  # stored in a busy spell; stored on a quicker machine
        costs.draft.pass_ms = {n: ms * factor for n, ms in timed.items()}
        store.save(costs.draft)
        again = load_costs(tiny_target, tiny_draft, store=store)
        assert again.draft is not None and again.draft.cost_ms(1) == pytest.approx(
            timed[1] * factor
        )
        profiler = PairProfiler(again, tiny_target, tiny_draft, store=store, load=quiet)
        assert not profiler.done and again.target.complete
        assert profiler.run()
        retimed = again.draft.cost_ms(1)
        assert retimed is not None and timed[1] / 5 < retimed < timed[1] * 5
        assert not again.draft.one_token_read
        stored = load_costs(tiny_target, tiny_draft, store=store).draft
        assert stored is not None and stored.cost_ms(1) == pytest.approx(retimed)


def test_a_retimed_tables_first_sample_moves_every_stored_price_alike() -> None:
    """Stored prices were timed at another moment's pace: the first sample taken here
    rescales them all (and the catch-up rate) before each size's own sample sets it, so
    no size is judged against a neighbour still at the old pace."""
    stored = CostTable(
        sizes=(1, 2), pass_ms={1: 60.0, 2: 80.0}, samples={1: 2, 2: 2}, catchup_row_ms=14.0
    )
    table = CostTable.from_json(stored.to_json())
    table.retime()
    assert table.to_measure() == [1, 2] and table.cost_ms(1) == 60.0  # priced as stored till then
    table.record(1, 30.0)
    assert table.pass_ms == {1: 30.0, 2: 40.0} and table.catchup_row_ms == pytest.approx(7.0)
    table.record(2, 44.0)  # slower than the rescaled 40: a size's own sample sets it
    assert table.pass_ms[2] == 44.0
    # A table timed in this process is not retimed.
    timed_here = CostTable(sizes=(1, 2), pass_ms={1: 60.0, 2: 80.0}, samples={1: 2, 2: 2})
    timed_here.retime()
    assert timed_here.complete


def test_a_reloaded_table_owes_the_sizes_the_saved_one_owed() -> None:
    """Whether a size is owed a sample turns on comparing times: a table stored complete
    must load complete (and one owing a size must still owe it), however close the call."""
    table = CostTable(sizes=(1, 2, 3))
    for n, ms in ((1, 0.2), (1, 0.2), (3, 0.3), (3, 0.3)):
        table.record(n, ms)
    # Size 2, timed once, is owed its agreeing sample.
    table.record(2, 0.2804)
    assert table.to_measure() == [2]
    again = CostTable.from_json(json.loads(json.dumps(table.to_json())))
    assert again.pass_ms == table.pass_ms and again.samples == table.samples
    assert again.to_measure() == [2]


def test_a_draft_table_stored_before_catch_ups_were_timed_gets_that_one_pass(
    tiny_target: LlamaModel, tiny_draft: LlamaModel, tmp_path: Path
) -> None:
    store = CostStore(tmp_path / "costs")
    costs = load_costs(tiny_target, tiny_draft, store=store)
    assert PairProfiler(costs, tiny_target, tiny_draft, store=store, load=quiet).run()
    assert costs.draft is not None
    costs.draft.catchup_row_ms = None  # as an older SpecChat stored it
    store.save(costs.draft)
    again = load_costs(tiny_target, tiny_draft, store=store)
    profiler = PairProfiler(again, tiny_target, tiny_draft, store=store, load=quiet)
    assert not profiler.done
    steps: list[int] = []
    assert profiler.run(progress=lambda n, share: steps.append(n))
    assert steps.count(CATCHUP_ROWS) == 1 and set(steps) - {CATCHUP_ROWS} == {1, 2}
    assert again.draft is not None and again.draft.catchup_row_ms


def test_a_changed_model_file_gets_a_new_table(tiny_models, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    copy = tmp_path / "model.gguf"
    copy.write_bytes(Path(tiny_models.target).read_bytes())
    store = CostStore(tmp_path / "costs")
    with LlamaModel(copy, n_ctx=512) as model:
        table = store.load(model)
        table.record(1, 1.0)
        store.save(table)
        assert store.load(model).pass_ms == {1: 1.0}
        stat = copy.stat()
        os.utime(copy, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
        assert CostKey.of(model) != table.key
        assert store.load(model).pass_ms == {}
    # Another context band or thread count is another table, too.
    with LlamaModel(copy, n_ctx=8192) as model:
        assert store.load(model).pass_ms == {}


# --- a pass's growth with the cached context ---------------------------------------------------


def test_passes_deep_in_a_chat_are_priced_with_their_attention_over_the_cache() -> None:
    table = jagged()
    table.context_tokens = 100
    table.slope_ms = 3.0  # ms a row per 1,000 cached tokens (the 1.5B target on 2 cores)
    costs = MachineCosts(table)
    assert costs.target_ms(16) == pytest.approx(5.16 * 28.0)  # no depth given: the table's
    costs.context = 1100
    # A pass of 16 grows 16 times as fast as one token: its price relative to one token rises.
    assert costs.target_ms(1) == pytest.approx(28.0 + 3.0)
    assert costs.target_ms(16) == pytest.approx(5.16 * 28.0 + 16 * 3.0)
    assert costs.target_ms(16) / costs.target_ms(1) > table.pass_ms[16] / table.pass_ms[1]
    # 16 beats 11 by 8 ms at the table's depth; 5 more rows of attention over 1,000 more
    # cached tokens cost 15 ms, so deep in the chat 11 tokens are checked in a pass of 11.
    assert table.pass_size(11) == 16
    assert costs.pass_size(11) == 11


def test_a_round_deep_in_a_chat_corrects_its_size_and_leaves_the_slope() -> None:
    table = jagged()
    table.context_tokens = 100
    table.slope_ms = 3.0
    costs = MachineCosts(table, context=2100)
    before = table.pass_ms[8]
    costs.observe_batch(8, before + 8 * 3.0 * 2.0)  # exactly what the slope predicts
    assert table.pass_ms[8] == pytest.approx(before) and table.slope_ms == 3.0
    costs.observe_batch(8, before * 1.21 + 8 * 3.0 * 2.0)  # its own part 21 % dearer
    assert table.pass_ms[8] == pytest.approx(before * 1.1) and table.slope_ms == 3.0


def test_plain_rounds_at_several_depths_correct_a_slope_measured_busy() -> None:
    """A slope measured while the machine was busy (53.6 ms a row per 1,000 tokens, the quiet
    figure 2.7): the first deep plain round, quicker than the slope alone, cuts it; plain
    rounds at depths apart then set it, and each size keeps its price where it last ran."""
    table = jagged()
    table.context_tokens = 100
    table.slope_ms = 53.6
    true = jagged()
    true.slope_ms = 2.7
    table.observe(1, true.cost_ms(1, 700) or 0.0, 700)
    assert (table.slope_ms or 0.0) < 53.6 / 10
    table.observe(8, true.cost_ms(8, 750) or 0.0, 750)
    eight = table.cost_ms(8, 750)
    for depth in range(700, 1300, 10):
        table.observe(1, true.cost_ms(1, depth) or 0.0, depth)
    assert table.slope_ms == pytest.approx(2.7, rel=0.01)
    assert table.cost_ms(1, 100) == pytest.approx(28.0, rel=0.01)
    assert table.cost_ms(8, 750) == pytest.approx(eight, rel=0.01)


def test_the_slope_is_the_line_through_each_depths_best_time() -> None:
    table = CostTable()
    for ms in (270.0, 269.0, 300.0):  # the last one stalled
        table.record_slope(100, ms)
    assert table.slope_ms is None and table.slope_owed
    for ms in (600.0, 366.0, 370.0):
        table.record_slope(1124, ms)
    assert not table.slope_owed
    # (366 − 269) ms over 1,024 tokens, for a pass of 32 rows: per row and 1,000 tokens.
    assert table.slope_ms == pytest.approx((366.0 - 269.0) / 32 / 1.024)
    again = CostTable.from_json(json.loads(json.dumps(table.to_json())))
    assert again.slope_ms == pytest.approx(table.slope_ms, abs=1e-4)
    assert not again.slope_owed
    # A faster deep pass than a shallow one is noise, never a negative price.
    flat = CostTable()
    flat.record_slope(100, 270.0)
    flat.record_slope(1124, 260.0)
    assert flat.slope_ms == 0.0


def test_the_slope_is_measured_between_answers_and_leaves_the_cache_where_it_was(
    tiny_target: LlamaModel, tmp_path: Path
) -> None:
    tiny_target.reset()
    conversation = tiny_target.tokenize("hello there " * 60)
    tiny_target.decode(conversation, logits="none")
    held = list(tiny_target.tokens)
    store = CostStore(tmp_path / "costs")
    costs = load_costs(tiny_target, None, store=store)
    profiler = PairProfiler(costs, tiny_target, store=store, load=quiet)
    steps: list[int] = []
    # Sizes first, then the slope's first pass, then a few chunks of filler: an answer comes.
    profiler.run(should_stop=lambda: steps.count(0) >= 3, progress=lambda n, _: steps.append(n))
    assert costs.target.complete and costs.target.slope_ms is None
    assert tiny_target.tokens == held  # pause() dropped the filler
    assert costs.target.slope_samples == []  # and the half-done measurement's passes
    assert profiler.run()
    assert costs.target.slope_ms is not None and costs.target.slope_ms >= 0
    assert tiny_target.tokens == held
    depths = sorted({c for c, _ in costs.target.slope_samples})
    assert depths[0] == len(held) and depths[-1] - depths[0] >= 512
    # Stored with the table: the next load does not measure it again.
    again = load_costs(tiny_target, None, store=store)
    assert again.target.slope_ms == pytest.approx(costs.target.slope_ms, abs=1e-4)
    assert PairProfiler(again, tiny_target, store=store, load=quiet).done


@pytest.mark.parametrize("context", [None, 100, 2500])
@pytest.mark.parametrize("sizes", [(1, 2, 4, 8, 16), tuple(range(1, 65))])
@pytest.mark.parametrize("rounds_seen", [False, True])
@pytest.mark.parametrize("largest", [None, 15, 3])
def test_price_list_is_target_ms_for_every_length(
    context: int | None, sizes: tuple[int, ...], rounds_seen: bool, largest: int | None
) -> None:
    """The price list auto reads each round is, length by length, what target_ms says: on a
    jagged table (16 below 15, ties between sizes), a partial one (lengths priced by the
    prior's shape), deep in a chat, where the slope can make a larger pass dearer, and once
    real rounds have moved the scale and some sizes (and shown which sizes are worth a
    larger pass)."""
    rng = np.random.default_rng(7)
    table = CostTable(slope_ms=3.5)
    for n in sizes:
        table.record(n, float(20 * n**0.6 + rng.integers(0, 3) * 7))
    table.record(16, table.pass_ms[8])  # a tie: the larger pass wins
    if rounds_seen:
        for n, ms in ((1, 31.0), (4, 60.0), (1, 45.0), (8, 90.0), (16, 1.0), (1, 26.0)):
            table.observe(n, ms, context)
        assert table.scale is not None and table.seen
    prices = table.price_list(70, context, largest=largest)
    assert prices is not None and len(prices) == 71
    for n in range(1, 71):
        assert prices[n] == table.target_ms(n, context, largest=largest), n
    assert CostTable().price_list(8) is None


def test_a_round_near_the_end_is_priced_at_the_passes_it_can_make() -> None:
    """Where 16 rows cost less than 15, a draft of 14 is priced (and padded) as the pass of
    16 — unless the round can make no pass above 15 (the answer or the context ends): then
    it pays for 15 rows, and is priced so."""
    pass_ms = {n: 20.0 + 6.0 * n for n in range(1, 16)}
    pass_ms[16] = 50.0  # the kernels' sweet spot
    table = CostTable(sizes=tuple(range(1, 17)), pass_ms=pass_ms, seen=dict.fromkeys(pass_ms, 1))
    assert table.pass_size(15) == 16 and table.target_ms(15) == pytest.approx(50.0)
    assert table.pass_size(15, largest=15) == 15
    assert table.target_ms(15, largest=15) == pytest.approx(110.0)
    held = table.price_list(15, largest=15)
    free = table.price_list(15)
    assert held is not None and free is not None
    assert held[15] == pytest.approx(110.0) and free[15] == pytest.approx(50.0)
    assert held[10] == pytest.approx(80.0) and free[10] == pytest.approx(50.0)


def test_an_offline_sample_of_no_time_is_dropped() -> None:
    # A deep pass whose time a stalled slope priced whole leaves nothing for the size.
    table = CostTable(sizes=(1, 2))
    table.record(2, 0.0)
    table.record(2, -3.0)
    assert table.pass_ms == {} and table.to_measure()[0] == 1


def test_a_round_whose_price_is_all_slope_sets_its_size_instead_of_failing() -> None:
    table = CostTable(sizes=(1, 2), pass_ms={1: 10.0, 2: 0.0}, slope_ms=5.0)
    table.observe(2, 14.0, context=table.context_tokens + 1000)
    assert table.pass_ms[2] == 14.0


def test_stalled_rounds_cannot_price_a_size_out_of_reach_for_good() -> None:
    """Rounds of 4 rows that each stalled (a busy machine) move the size up, each by a
    factor at most; had they priced it above CLIP times a larger size, auto would never
    choose 4 rows again and no round would bring it back: the shape checks reprice it. Nor
    does any size cost more than as many one-token passes."""
    pass_ms = {n: 30.0 + 8.0 * (n - 1) for n in range(1, 17)}
    table = CostTable(sizes=tuple(range(1, 17)), pass_ms=pass_ms, seen=dict.fromkeys(pass_ms, 1))
    for _ in range(12):
        table.observe(4, 5_000.0)
    assert table.pass_ms[4] <= 4 * table.pass_ms[1]
    assert table.pass_ms[4] <= CLIP * table.pass_ms[8]
    assert table.pass_size(3) in (3, 4)
    # A table stored so (by a version without these checks) loads checked.
    stored = table.to_json()
    stored["pass_ms"] = {**stored["pass_ms"], "4": 1_680.0, "16": 11_203.0}
    loaded = CostTable.from_json(stored)
    assert loaded.pass_ms[4] <= 4 * loaded.pass_ms[1]
    assert loaded.pass_ms[16] <= 16 * loaded.pass_ms[1]


#: Target passes of the default target in Q4_0 after 100 cached tokens on a 2-core AVX-512
#: EPYC, medians of three (docs/costs.md): a curve as the machine runs it.
EPYC_Q4_0_MS = {1: 26.0, 2: 46.0, 4: 48.0, 8: 84.0, 16: 113.0, 24: 184.0, 32: 210.0, 64: 401.0}


def test_no_size_costs_more_than_the_smaller_passes_it_splits_into() -> None:
    """A table stored with its deep sizes measured stalled (24-64 rows at as many one-token
    passes, four times what they cost) would keep `auto` from ever checking a long copy in
    one pass, so no round would correct them: a pass over m rows does the work of ⌈m/k⌉
    passes over k rows, and is priced no higher than that by more than the curve's
    jaggedness (1 / FLOOR); those no round has priced are measured again, and their new
    samples stand. A curve as the machine runs it is left as it is."""
    measured = CostTable(pass_ms=dict(EPYC_Q4_0_MS), samples=dict.fromkeys(EPYC_Q4_0_MS, 2))
    measured.check_shape()
    assert measured.pass_ms == EPYC_Q4_0_MS

    stored = measured.to_json()
    stored["pass_ms"] = {**stored["pass_ms"], "24": 624.0, "32": 832.0, "64": 1664.0}
    loaded = CostTable.from_json(stored)
    for m in (24, 32, 64):
        assert loaded.pass_ms[m] <= -(-m // 16) * EPYC_Q4_0_MS[16] / FLOOR
    owed = [m for m in loaded.to_measure() if m in EPYC_Q4_0_MS]
    assert owed == [32, 64, 24]  # coarse sizes first
    for m in owed:
        loaded.record(m, EPYC_Q4_0_MS[m])
    assert loaded.pass_ms == EPYC_Q4_0_MS

    # A size real rounds taught stalled is held to the same bound, and stays theirs.
    taught = CostTable(
        pass_ms=dict(EPYC_Q4_0_MS),
        samples=dict.fromkeys(EPYC_Q4_0_MS, 2),
        seen=dict.fromkeys(EPYC_Q4_0_MS, 1),
    )
    for _ in range(6):
        taught.observe(32, 5_000.0)
    assert taught.pass_ms[32] <= 2 * EPYC_Q4_0_MS[16] / FLOOR
    assert 32 not in taught.to_measure()


def test_a_stored_tables_one_token_time_is_timed_again_before_auto_drafts() -> None:
    """A table read from a file holds one token's time at the scale its last session
    taught (a server's rounds shared the interpreter with its HTTP thread: 32 ms stored,
    27 timed here), and every price scales by it: a stale, high one makes every draft look
    better than it is. `auto`'s first round after a load is plain, and times it; then it
    drafts where the copy pays."""
    from specchat.engine.costs.machine import MachineCosts
    from specchat.engine.decoding.schedule import AutoPolicy
    from specchat.engine.drafting import PromptLookupDrafter

    measured = {n: ms * 32.0 / 26.0 for n, ms in EPYC_Q4_0_MS.items()}
    stored = CostTable(pass_ms=measured, samples=dict.fromkeys(measured, 2)).to_json()
    loaded = CostTable.from_json(stored)
    assert loaded.one_token_read
    policy = AutoPolicy(costs=MachineCosts(loaded))
    offer = PromptLookupDrafter().offer_match(16, 12)
    first = policy.choose([offer])
    assert first.mode == "plain" and "timing one token" in first.reason
    policy.observe(first, batch=1, verify_ms=26.0, drafted=0, accepted=0)
    assert not loaded.one_token_read and loaded.cost_ms(1) == pytest.approx(26.0)
    assert policy.choose([offer]).mode == "lookup"
    assert not CostTable(pass_ms=dict(EPYC_Q4_0_MS)).one_token_read  # timed here: no need


def test_a_drafted_tokens_stored_stalled_price_is_probed_at_its_prior_until_timed_here() -> None:
    """A head's table has one size, so no larger pass bounds a price stored stalled. One
    above a target token's (a drafter is smaller than the target) is judged for probing at
    the prior until a round of this process times it; rounds are priced as stored, and once
    timed both prices are the measured one."""
    stored = CostTable(sizes=(1,), pass_ms={1: 12.0}, samples={1: 2}).to_json()
    head = CostTable.from_json(stored)
    assert head.drafted_token_ms(plain_ms=10.0, share=8.0) == (12.0, 1.25)
    assert head.drafted_token_ms(plain_ms=20.0, share=8.0) == (12.0, 12.0)  # plausible
    assert head.drafted_token_ms(plain_ms=None, share=8.0) == (12.0, 12.0)  # nothing timed
    head.observe(1, 4.0)  # a drafting round timed a token: quicker sets it outright
    assert head.drafted_token_ms(plain_ms=10.0, share=8.0) == (4.0, 4.0)
    head.observe(1, 11.0)  # timed here, even above a target token, it is what it is
    assert head.drafted_token_ms(plain_ms=5.0, share=8.0)[1] > 5.0
    assert CostTable(sizes=(1,)).drafted_token_ms(plain_ms=10.0, share=8.0) == (1.25, 1.25)
