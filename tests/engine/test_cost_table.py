"""The cost table: rounding passes up to cheaper sizes, measuring between answers, storing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from specchat.engine.cost_store import CostStore
from specchat.engine.cost_table import (
    CATCHUP_ROWS,
    COARSE_SIZES,
    DRIFT_RANGE,
    DRIFT_SMOOTHING,
    MAX_ROWS,
    SMOOTHING,
    CostKey,
    CostTable,
    CostTableError,
    MachineCosts,
)
from specchat.engine.llama import LlamaModel
from specchat.engine.profiling import PairProfiler, TableMeasurer, load_costs

#: The shipped Q4_K_M target's pass cost on a 2-core CPU, × one token (issue figures).
Q4_K_M = {1: 1.0, 2: 1.63, 3: 2.06, 4: 2.61, 5: 3.38, 8: 4.56, 12: 5.74, 15: 6.82, 16: 5.16}


def jagged(relative: dict[int, float] = Q4_K_M, one_ms: float = 28.0) -> CostTable:
    """A table measured at every size 1 … 16, filled in linearly between the given points."""
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
    return CostTable(sizes=tuple(range(1, 17)), pass_ms=pass_ms)


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
    table.pass_ms[15] = 200.0  # once seen dearer than 16, it rounds up
    assert table.pass_size(15) == 16
    assert CostTable().target_ms(3) is None


def test_rounds_refresh_the_table_but_a_stall_moves_it_little() -> None:
    table = CostTable(pass_ms={1: 30.0, 2: 50.0})
    table.observe(1, 33.0)
    assert table.pass_ms[1] == pytest.approx(30.0 + SMOOTHING * 3.0)
    table.observe(2, 5000.0)  # another process stole the CPU for a while
    assert table.pass_ms[2] < 50.0 * 1.5
    table.observe(7, 9000.0)  # first real time at an unmeasured size: capped by its guess
    assert table.pass_ms[7] < 9000.0


def test_a_round_far_faster_than_the_table_has_it_measured_again() -> None:
    table = CostTable(sizes=(1, 2))
    table.record(1, 190.0)  # measured while another process held the CPU
    table.record(2, 60.0)
    table.record(1, 185.0)
    table.record(2, 61.0)
    assert table.complete
    table.observe(1, 30.0)
    assert table.pass_ms[1] == 30.0
    assert not table.complete and table.to_measure() == [1, 2]
    table.record(1, 28.0)
    assert table.pass_ms[1] == 28.0
    table.record(2, 500.0)  # a stall in the new measurement never undoes a better time
    assert table.pass_ms[2] == 60.0


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
    assert table.pass_size(8) == 12
    for n in table.to_measure():
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
    table = CostTable()
    TableMeasurer(tiny_target, table).run()
    assert table.complete
    assert sorted(table.pass_ms) == list(range(1, MAX_ROWS + 1))
    assert all(table.samples[n] >= 1 for n in table.sizes)
    assert tiny_target.tokens == held


def test_measurement_stops_when_an_answer_comes_and_resumes_from_disk(
    tiny_target: LlamaModel, tiny_draft: LlamaModel, tmp_path: Path
) -> None:
    tiny_target.reset()
    tiny_draft.reset()
    store = CostStore(tmp_path / "costs")
    costs = load_costs(tiny_target, tiny_draft, store=store)
    profiler = PairProfiler(costs, tiny_target, tiny_draft, store=store)
    steps: list[int] = []
    stopped = profiler.run(
        should_stop=lambda: len(steps) >= 5, progress=lambda n, share: steps.append(n)
    )
    assert not stopped
    assert steps == list(COARSE_SIZES[:5])
    # Paused: what was measured is on disk, and a later load resumes there.
    again = load_costs(tiny_target, tiny_draft, store=store)
    assert sorted(again.target.samples) == sorted(COARSE_SIZES[:5])
    resumed = PairProfiler(again, tiny_target, tiny_draft, store=store)
    first = resumed.step()
    assert first == COARSE_SIZES[5]
    assert resumed.run()
    final = load_costs(tiny_target, tiny_draft, store=store)
    assert final.target.complete and final.draft is not None and final.draft.complete
    assert final.draft_token_ms is not None
    # The draft model's batched catch-up rate is measured too, and kept on disk. (Whether a
    # row of it costs less than a token is the machine's business: one timed pass of a tiny
    # model, and a stall on a busy machine made it cost twice as much.)
    catchup = final.draft.catchup_row_ms
    assert catchup is not None and catchup > 0
    assert final.catchup_ms(100) == pytest.approx(100 * catchup)
    assert PairProfiler(final, tiny_target, tiny_draft, store=store).done


def test_a_reloaded_table_owes_the_sizes_the_saved_one_owed() -> None:
    """Whether a size is owed a sample turns on comparing times: a table stored complete
    must load complete (and one owing a size must still owe it), however close the call."""
    table = CostTable(sizes=(1, 2, 3))
    for n, ms in ((1, 0.2), (1, 0.2), (3, 0.3), (3, 0.3)):
        table.record(n, ms)
    # Size 2, timed once and dearer than 3, is owed its second sample.
    table.record(2, 0.4204)
    assert table.to_measure() == [2]
    again = CostTable.from_json(json.loads(json.dumps(table.to_json())))
    assert again.pass_ms == table.pass_ms and again.offline_ms == table.offline_ms
    assert again.to_measure() == [2]


def test_a_draft_table_stored_before_catch_ups_were_timed_gets_that_one_pass(
    tiny_target: LlamaModel, tiny_draft: LlamaModel, tmp_path: Path
) -> None:
    store = CostStore(tmp_path / "costs")
    costs = load_costs(tiny_target, tiny_draft, store=store)
    assert PairProfiler(costs, tiny_target, tiny_draft, store=store).run()
    assert costs.draft is not None
    costs.draft.catchup_row_ms = None  # as an older SpecChat stored it
    store.save(costs.draft)
    again = load_costs(tiny_target, tiny_draft, store=store)
    profiler = PairProfiler(again, tiny_target, tiny_draft, store=store)
    assert not profiler.done
    assert profiler.step() == CATCHUP_ROWS
    assert profiler.done and again.draft is not None and again.draft.catchup_row_ms


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


def test_a_round_deep_in_a_chat_teaches_the_cost_at_the_tables_depth() -> None:
    table = jagged()
    table.context_tokens = 100
    table.slope_ms = 3.0
    costs = MachineCosts(table, context=2100)
    before = table.pass_ms[8]
    costs.observe_batch(8, before + 8 * 3.0 * 2.0)  # exactly what the slope predicts
    assert table.pass_ms[8] == pytest.approx(before) and table.pace.factor == pytest.approx(1.0)
    table.observe(8, before + 8 * 3.0 * 2.0 + 10.0, 2100)  # 10 ms slower than predicted
    assert table.pass_ms[8] == pytest.approx(before + SMOOTHING * 10.0)


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
    profiler = PairProfiler(costs, tiny_target, store=store)
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
    assert PairProfiler(again, tiny_target, store=store).done


@pytest.mark.parametrize("context", [None, 100, 2500])
@pytest.mark.parametrize("sizes", [(1, 2, 4, 8, 16), tuple(range(1, 65))])
@pytest.mark.parametrize("rounds_seen", [False, True])
def test_price_list_is_target_ms_for_every_length(
    context: int | None, sizes: tuple[int, ...], rounds_seen: bool
) -> None:
    """The price list auto reads each round is, length by length, what target_ms says: on a
    jagged table (16 below 15, ties between sizes), a partial one (lengths priced by the
    prior's shape), deep in a chat, where the slope can make a larger pass dearer, and once
    real rounds have moved the drift, the pace and some sizes' offline shares."""
    rng = np.random.default_rng(7)
    table = CostTable(slope_ms=3.5)
    for n in sizes:
        table.record(n, float(20 * n**0.6 + rng.integers(0, 3) * 7))
    table.record(16, table.pass_ms[8])  # a tie: the larger pass wins
    if rounds_seen:
        for n, ms in ((1, 31.0), (4, 60.0), (1, 45.0), (8, 90.0), (1, 26.0)):
            table.observe_pace(n, ms, context)
            table.observe(n, ms, context)
        assert table.drift != 1.0 and table.pace.factor != 1.0
        assert any(0.0 < share < 1.0 for share in table.fresh.values())
    prices = table.price_list(70, context)
    assert prices is not None and len(prices) == 71
    for n in range(1, 71):
        assert prices[n] == table.target_ms(n, context), n
    assert CostTable().price_list(8) is None


def measured(relative: dict[int, float] = Q4_K_M, one_ms: float = 28.0) -> CostTable:
    """A table whose every size was sampled offline (record), as the background measures."""
    table = CostTable(sizes=tuple(range(1, 17)))
    for n, ms in jagged(relative, one_ms).pass_ms.items():
        table.record(n, ms)
    return table


def test_rounds_slower_than_the_samples_slow_every_size_alike() -> None:
    """Plain rounds refresh one token's cost all the time, the sizes drafts use seldom: when
    real rounds run 30 % over the offline samples, a pass of 8 must be priced 30 % over its
    sample too, or drafting looks 30 % cheaper against plain than it is."""
    table = measured()
    sample_8, sample_1 = table.pass_ms[8], table.pass_ms[1]
    for _ in range(100):
        table.observe(1, 1.3 * sample_1)
    assert table.drift == pytest.approx(1.3, rel=0.02)
    assert table.cost_ms(1) == pytest.approx(1.3 * sample_1, rel=0.01)
    assert table.cost_ms(8) == pytest.approx(1.3 * sample_8, rel=0.02)
    assert table.target_ms(8) / table.target_ms(1) == pytest.approx(sample_8 / sample_1, rel=0.03)
    prices = table.price_list(16)
    assert prices is not None and prices[8] == table.target_ms(8)


def test_a_size_refreshed_by_its_own_rounds_keeps_its_own_time() -> None:
    table = measured()
    sample_4 = table.pass_ms[4]
    for _ in range(100):
        table.observe(1, 1.3 * table.offline_ms[1])
        table.observe(4, sample_4)  # passes of 4 take just their sample
    assert table.cost_ms(4) == pytest.approx(sample_4, rel=0.01)
    assert table.drift > 1.05  # the rest of the table still moves with the pace


def test_the_drift_is_stored_with_the_table_and_a_stall_barely_moves_it(tmp_path: Path) -> None:
    table = measured()
    for _ in range(40):
        table.observe(2, 1.2 * table.offline_ms[2])
    drift = table.drift
    table.observe(1, 50 * table.offline_ms[1])  # another process held the CPU
    assert table.drift < drift + DRIFT_SMOOTHING * DRIFT_RANGE[1]
    back = CostTable.from_json(json.loads(json.dumps(table.to_json())))
    assert back.drift == pytest.approx(table.drift, abs=1e-4)
    assert back.cost_ms(9) == pytest.approx(table.cost_ms(9), rel=1e-4)
    # A file written before drifts were kept prices exactly as its times say.
    old = table.to_json()
    for name in ("offline_ms", "fresh", "drift"):
        del old[name]
    assert CostTable.from_json(old).cost_ms(9) == pytest.approx(table.pass_ms[9], abs=1e-3)
