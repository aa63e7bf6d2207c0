"""The RPC report: auto's speed-up over plain by prompt and setting, and the goals checked at
the largest added round trip."""

from __future__ import annotations

from specchat.bench.live.records import RunRecord, Variant
from specchat.bench.reports.rpc_report import LOCAL, SettingResult, _speeds, markdown, report


def _record(prompt: str, mode: str, tokens: int, seconds: float) -> RunRecord:
    return RunRecord(
        prompt=prompt,
        category="test",
        variant=Variant(mode, None),
        temperature=0.0,
        repeat=0,
        tokens=tuple(range(tokens)),
        margins=(),
        text="",
        elapsed_s=seconds,
    )


def test_speeds_are_tokens_over_time_by_prompt_and_mode() -> None:
    records = [_record("a", "plain", 10, 1.0), _record("a", "plain", 10, 3.0)]
    records += [_record("a", "auto", 20, 2.0), _record("b", "auto", 5, 1.0)]
    assert _speeds(records, "plain") == {"a": 5.0}
    assert _speeds(records, "auto") == {"a": 10.0, "b": 5.0}


def test_the_goals_compare_the_largest_round_trip_with_the_local_run() -> None:
    local = SettingResult(LOCAL, "", {"a": 10.0, "b": 10.0}, {"a": 15.0, "b": 12.0})
    near = SettingResult("1 ms", "h:1", {"a": 5.0, "b": 5.0}, {"a": 8.0, "b": 6.0})
    far = SettingResult("5 ms", "h:1", {"a": 2.0, "b": 2.0}, {"a": 4.0, "b": 1.8})
    data = report([local, near, far])
    goals = {g["goal"]: g["result"] for g in data["goals"]}  # type: ignore[union-attr]
    assert goals == {
        "auto's speed-up at 5 ms ≥ its speed-up locally": "PASS",
        "auto ≥ 1.0× plain on every prompt at 5 ms": "FAIL",
    }
    text = markdown(data)
    assert "| a | 1.50× | 1.60× | 2.00× |" in text
    assert "| b | 1.20× | 1.20× | 0.90× |" in text


def test_each_setting_shows_the_cost_curve_it_measured() -> None:
    local = SettingResult(
        LOCAL, "", {"a": 10.0}, {"a": 12.0}, curve_ms={1: 30.0, 16: 90.0}, best_lookup=(15, 5.33)
    )
    far = SettingResult("5 ms", "h:1", {"a": 5.0}, {"a": 6.0}, curve_ms={1: 41.0, 16: 97.5})
    unmeasured = SettingResult("1 ms", "h:1", {"a": 5.0}, {"a": 6.0})
    data = report([local, unmeasured, far])
    text = markdown(data)
    assert "- local: 1: 30.0, 16: 90.0 (best at α = 1: ×5.33 at K = 15)" in text
    assert "- 5 ms: 1: 41.0, 16: 97.5" in text
    assert "- 1 ms:" not in text
