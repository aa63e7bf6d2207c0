"""The one-row check: the cost curve's one-row pass against the run's rounds without a draft."""

from __future__ import annotations

from specchat.bench.live.records import RoundLog, RunRecord, Variant
from specchat.bench.reports.one_row import goal, one_row_check, plain_round_ms


def _record(mode: str, rounds: list[tuple[int, float]]) -> RunRecord:
    logs = tuple(RoundLog(mode, 4, d, 0, 0.0, ms, ms, "") for d, ms in rounds)
    return RunRecord("p", "chat", Variant(mode, None), 0.0, 0, (1,), (), "", 1.0, round_logs=logs)


def test_agreeing_curve_passes() -> None:
    records = [_record("plain", [(0, 66.0), (0, 64.0), (0, 70.0)]), _record("auto", [(3, 90.0)])]
    assert plain_round_ms(records) == [66.0, 64.0, 70.0]  # the drafted round is not one row
    check = one_row_check(68.0, records)
    assert check is not None and check["agrees"] and check["rounds"] == 3
    assert check["engine_ms"] == 66.0
    name, passed, detail = goal(check)
    assert passed is True and "10%" in name and "66.00 ms" in detail


def test_curve_off_by_more_than_ten_percent_is_flagged() -> None:
    """The held-out report's case: 96 ms measured, 66 ms paid."""
    check = one_row_check(96.0, [_record("plain", [(0, 66.0)] * 5)])
    assert check is not None and not check["agrees"]
    assert check["ratio"] == round(96 / 66, 4)
    _, passed, detail = goal(check)
    assert passed is False and "off by as much" in detail


def test_nothing_to_check() -> None:
    assert one_row_check(50.0, [_record("auto", [(2, 80.0)])]) is None
    assert goal(None)[1] is None
