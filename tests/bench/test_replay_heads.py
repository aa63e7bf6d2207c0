"""The replay drafts with the real head drafter over the heads' recorded drafts, priced from
the head's table; traces and cost files without heads still load."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path

import pytest

from specchat.bench.hindsight.recorded_target import VirtualClock
from specchat.bench.hindsight.replay import (
    dense,
    read_costs,
    read_traces,
    replay,
    replay_answer,
    replay_rounds,
    summary_lines,
)
from specchat.bench.live.trace import AnswerTrace, record_trace
from specchat.cli import main
from specchat.engine.costs.machine import MachineCosts
from specchat.engine.decoding.decoder import SpeculativeDecoder
from specchat.engine.decoding.schedule import AutoPolicy
from specchat.engine.drafting import AUTO
from specchat.engine.drafting.base import LoadedPair
from specchat.engine.drafting.mtp.mtp_driver import DraftHead
from specchat.engine.llamacpp.model import LlamaModel
from specchat.engine.types import Controls, GenerationRequest, StopReason
from specchat.tinyarch import write_tiny_qwen35
from tests.helpers.priced import PricedHead, PricedModel
from tests.helpers.traces import COPIED_CODE_PROMPT, MISS, linear_costs, round_choices

PROMPT = (100, 101, 102, 103)
ANSWER = tuple(range(1, 11))
HEAD_MS = 2.0


def _with_head(trace: AnswerTrace, right: int) -> AnswerTrace:
    """`trace` with an MTP head whose draft at every position holds `right` of the answer's
    tokens, then one no answer holds (as far as verification reads it)."""
    answer = trace.answer
    drafts = tuple(
        tuple([*answer[i : i + right], MISS][: len(answer) - i]) for i in range(len(answer))
    )
    return replace(trace, heads={"mtp": drafts})


def _costs() -> MachineCosts:
    costs = linear_costs(10.0, 1.0)
    costs.seed({}, head_token_ms={"mtp": HEAD_MS})
    return costs


def test_a_recorded_head_drafts_its_recorded_tokens_at_the_tables_price() -> None:
    trace = _with_head(record_trace("head", PROMPT, ANSWER), right=2)

    replayed = replay_answer(trace, _costs(), controls=Controls("mtp", 3))

    rounds = replayed.rounds
    # Each K = 3 draft keeps the head's two right tokens, the target adds the third; the
    # last token is the target's own (no room to draft before the answer's end).
    assert [(r.choice.mode, r.drafted, r.accepted) for r in rounds] == [
        ("mtp", 3, 2),
        ("mtp", 3, 2),
        ("mtp", 3, 2),
        ("plain", 0, 0),
    ]
    renamed, _ = dense(trace)  # the ids the replay runs on
    assert [e.token for r in rounds for e in r.events] == list(renamed.answer)
    miss = renamed.heads["mtp"][0][2]
    assert all(r.rejected == (miss,) for r in rounds[:3])  # the head's recorded miss
    assert all(r.draft_ms == pytest.approx(3 * HEAD_MS) for r in rounds[:3])
    # Three passes of 4 rows (10 + 3 × 1 ms) with three head steps each, and one of 1 row.
    assert replayed.clock_ms == pytest.approx(3 * (13.0 + 3 * HEAD_MS) + 10.0)


def test_auto_drafts_with_a_head_that_is_always_right_and_the_ledger_adds_up() -> None:
    trace = _with_head(record_trace("head", PROMPT, tuple(range(1, 41))), right=16)
    costs = _costs()

    [result] = replay([trace], costs)

    assert result.kept.get("mtp", 0) > 20
    assert result.speedup > 1.5
    assert result.fixed.startswith("mtp K=")
    assert sum(result.ledger.ms.values()) == pytest.approx(result.ledger.gap_ms, abs=1e-6)
    lines = "\n".join(summary_lines([result], costs))
    assert "MTP head (mtp) token 2.00 ms (0.20× a target token)" in lines


def test_a_head_the_costs_do_not_price_is_not_replayed() -> None:
    trace = _with_head(record_trace("head", PROMPT, ANSWER), right=16)
    rounds = replay_rounds(trace, linear_costs(10.0, 1.0))
    assert all(r.choice.mode != "mtp" for r in rounds)


def test_traces_and_cost_files_keep_heads_and_old_ones_load(tmp_path: Path) -> None:
    plain = record_trace("old", PROMPT, ANSWER)
    old = plain.to_json()
    assert "heads" not in old  # a trace without heads is written as before
    assert AnswerTrace.from_json(old).heads == {}
    headed = _with_head(plain, right=2)
    assert AnswerTrace.from_json(json.loads(json.dumps(headed.to_json()))) == headed
    broken = headed.to_json()
    broken["heads"]["mtp"] = broken["heads"]["mtp"][:-1]
    with pytest.raises(ValueError, match="different lengths"):
        AnswerTrace.from_json(broken)

    costs = _costs()
    stored = costs.to_json()
    assert MachineCosts.from_json(stored).head_token_ms("mtp") == HEAD_MS
    del stored["heads"]  # a cost file written before heads had tables
    assert MachineCosts.from_json(stored).heads == {}
    assert read_costs("gpu").heads == {}  # the shipped files have none


def test_bench_replay_shows_the_head_among_the_sources(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rounds = tmp_path / "rounds.jsonl"
    trace = _with_head(record_trace("head", PROMPT, tuple(range(1, 41))), right=16)
    rounds.write_text(json.dumps(trace.to_json()) + "\n", encoding="utf-8")
    costs_file = tmp_path / "costs.json"
    costs_file.write_text(json.dumps(_costs().to_json()), encoding="utf-8")
    assert read_traces(rounds) == [trace]
    out = tmp_path / "replay"

    argv = ["bench", "--replay", str(rounds), "--costs", str(costs_file), "--out", str(out)]
    assert main(argv) == 0

    printed = capsys.readouterr().out
    assert "MTP head (mtp) token 2.00 ms" in printed
    assert "mtp " in printed.split("auto's rounds")[1]
    report = json.loads((out / "replay.json").read_text(encoding="utf-8"))
    [prompt] = report["prompts"]
    assert prompt["kept"]["mtp"] > 0 and prompt["main_drafter"] == "mtp"
    assert report["costs"]["heads"]["mtp"]["pass_ms"] == {"1": HEAD_MS}


# --- live against replay -----------------------------------------------------------------------
def test_a_replayed_answer_gives_the_live_head_rounds_back_choice_for_choice(
    tmp_path: Path,
) -> None:
    costs = read_costs("gpu")
    costs.target.seen = dict.fromkeys(costs.target.pass_ms, 1)  # as replay() prices
    # A head step at a tenth of a target token: on these costs auto drafts with it.
    costs.seed({}, head_token_ms={"mtp": 0.1 * (costs.target_ms(1) or 0.0)})
    clock = VirtualClock()
    target = write_tiny_qwen35(tmp_path / "hybrid.gguf", mtp=True)
    # Snapshots deep enough for any draft: dropping a rejected one costs nothing, as in the
    # replay, whose recorded target prices rollback as an attention cache's.
    with LlamaModel(target, n_ctx=2048, n_threads=1, load_mtp=True, snapshot_depth=64) as model:
        priced = copy.deepcopy(costs)
        pair = LoadedPair.of(
            PricedModel(model, priced, clock),  # type: ignore[arg-type]
            None,
            costs=priced,
            clock=clock,
            heads={"mtp": PricedHead(DraftHead(model), "mtp", priced, clock)},
        )
        decoder = SpeculativeDecoder(pair, auto=AutoPolicy(gpu=priced.target.gpu, costs=priced))
        prompt = tuple(model.tokenize(COPIED_CODE_PROMPT))
        request = GenerationRequest(prompt, max_tokens=120, controls=Controls(mode=AUTO))
        live = [r for r in decoder.generate(request) if r.rows]
        answer = [e.token for r in live for e in r.events]
        margins = [e.margin for r in live for e in r.events]
        trace = record_trace(
            "hybrid",
            prompt,
            answer,
            heads=decoder.drafters.heads(),
            target=model,
            margins=margins,
        )
    assert live[-1].stop == StopReason.MAX_TOKENS  # the recorded answer ends where live did

    replayed = replay_rounds(trace, costs)

    assert any(r.choice.mode == "mtp" and r.drafted for r in live)  # auto drafted with it
    assert round_choices(replayed) == round_choices(live)
