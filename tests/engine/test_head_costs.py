"""A draft head's cost per drafted token has a table of its own: measured between answers as
one step of the head, stored per pair beside the target's, and what the head drafter prices
itself with at the next load; tables and cost files from before heads still load."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

import pytest

from specchat.commands import models as models_command
from specchat.engine.costs.key import CostKey
from specchat.engine.costs.machine import MachineCosts
from specchat.engine.costs.profiling import PairProfiler, load_costs
from specchat.engine.costs.store import CostStore
from specchat.engine.costs.table import CostTable
from specchat.engine.decoding.decoder import SpeculativeDecoder
from specchat.engine.decoding.schedule import AutoPolicy
from specchat.engine.drafting.base import LoadedPair
from specchat.engine.drafting.head import head_files
from specchat.engine.drafting.mtp import load_assistant
from specchat.engine.llamacpp.model import LlamaModel
from specchat.engine.session import ChatEngine
from specchat.tinyarch import write_tiny_gemma4, write_tiny_gemma4_assistant, write_tiny_qwen35
from tests.helpers.models_cli import run_cli


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_qwen35(tmp_path_factory.mktemp("heads") / "qwen35-mtp.gguf", mtp=True)


def test_the_profiler_measures_and_stores_the_heads_table(hybrid: Path, tmp_path: Path) -> None:
    store = CostStore(tmp_path / "costs")
    with LlamaModel(hybrid, n_ctx=512, n_threads=1, load_mtp=True) as model:
        costs = load_costs(
            model, None, head_files=head_files(LoadedPair(target=model)), store=store
        )
        assert set(costs.heads) == {"mtp"} and costs.head_token_ms("mtp") is None
        decoder = SpeculativeDecoder(
            LoadedPair.of(model, costs=costs), auto=AutoPolicy(costs=costs)
        )
        drafter = decoder.drafters["mtp"]
        assert drafter.table is costs.heads["mtp"]  # type: ignore[attr-defined]

        profiler = PairProfiler(costs, model, heads=decoder.drafters.heads(), store=store)
        assert profiler.run()

        head = costs.heads["mtp"]
        assert head.complete and (head.cost_ms(1) or 0.0) > 0
        assert head.key is not None and head.key.head == "mtp"
        assert head.checkpoint_ms is None  # the target's recurrent state is the target's
        # Stored beside the target's table, under a key of its own.
        assert store.path(head.key).exists() and costs.target.key is not None
        assert store.path(head.key) != store.path(costs.target.key)

        again = load_costs(
            model, None, head_files=head_files(LoadedPair(target=model)), store=store
        )
        assert again.heads["mtp"].pass_ms == head.pass_ms
        # Only the head's own rounds correct its price: each load times it again.
        reloaded = PairProfiler(again, model, heads=decoder.drafters.heads(), store=store)
        assert not reloaded.done and again.target.complete
        assert reloaded.run() and not again.heads["mtp"].one_token_read


def test_the_head_drafter_prices_itself_from_the_stored_table(hybrid: Path, tmp_path: Path) -> None:
    store = CostStore(tmp_path / "costs")
    with LlamaModel(hybrid, n_ctx=512, n_threads=1, load_mtp=True) as model:
        table = load_costs(
            model, None, head_files=head_files(LoadedPair(target=model)), store=store
        ).heads["mtp"]
    table.pass_ms[1] = 0.25
    table.samples[1] = 2
    store.save(table)

    engine = ChatEngine.load(hybrid, n_ctx=512, n_threads=1, cost_store=store)
    try:
        drafter = engine.decoder.drafters["mtp"]
        assert drafter.table is engine.costs.heads["mtp"]  # type: ignore[attr-defined]
        assert engine.costs.head_token_ms("mtp") == 0.25
        # Its offer prices a drafted token at the stored time (after the target's cache,
        # which the head follows).
        prompt = engine.target.tokenize("hello there")
        engine.target.decode(prompt[:-1], logits="none")
        offer = drafter.offer(prompt, 8, None)
        assert offer is not None and offer.token_ms == 0.25
    finally:
        engine.close()


def test_a_models_own_key_digests_as_before_heads_had_tables(hybrid: Path) -> None:
    with LlamaModel(hybrid, n_ctx=512, n_threads=1) as model:
        own = CostKey.of(model)
        head = CostKey.of(model, head="mtp")
    # A file stored before heads had tables is named by the digest of the other fields.
    fields = {k: v for k, v in asdict(own).items() if k != "head"}
    old_name = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:20]
    assert own.digest() == old_name
    assert head.digest() != own.digest()


def test_a_stored_table_without_heads_still_loads(tmp_path: Path) -> None:
    old_key = {
        "file": "/models/t.gguf",
        "size": 1,
        "mtime_ns": 2,
        "backend": "CPU",
        "threads": 2,
        "ctx_band": 4096,
    }
    table = CostTable.from_json(
        {"pass_ms": {"1": 10.0, "2": 12.0}, "sizes": [1, 64], "key": old_key}
    )
    assert table.key == CostKey(**old_key) and table.key.head == ""
    old_file = {"schema": 1, "target": table.to_json(), "draft": None, "catchup_token_ms": None}
    costs = MachineCosts.from_json(old_file)
    assert costs.heads == {} and costs.head_token_ms("mtp") is None
    written = costs.to_json()
    assert written["heads"] == {} and MachineCosts.from_json(written).heads == {}


def test_models_profile_prints_the_heads_row(
    hybrid: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(models_command, "pair_on_disk", lambda pair_id: (hybrid, None))
    assert run_cli("profile", "hybrid", "--ctx", "512", "--threads", "1") == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("head "))
    assert "MTP head:" in row and "ms a drafted token" in row and "× a target token" in row


def test_a_gemma4_assistants_table_is_keyed_by_its_own_file(tmp_path: Path) -> None:
    target_file = write_tiny_gemma4(tmp_path / "gemma4.gguf")
    assistant_file = write_tiny_gemma4_assistant(tmp_path / "gemma4-assistant.gguf")
    store = CostStore(tmp_path / "costs")
    with LlamaModel(target_file, n_ctx=512, n_threads=1) as target:
        assistant = load_assistant(assistant_file, target)
        costs = load_costs(
            target,
            None,
            head_files=head_files(LoadedPair(target=target, draft=None, head=assistant)),
            store=store,
        )
        assert set(costs.heads) == {"assistant"}
        key = costs.heads["assistant"].key
        assert key is not None and key.head == "assistant"
        assert key.file == str(assistant_file.resolve())
        decoder = SpeculativeDecoder(
            LoadedPair.of(target, head=assistant, costs=costs), auto=AutoPolicy(costs=costs)
        )
        assert decoder.drafters["assistant"].table is costs.heads["assistant"]  # type: ignore[attr-defined]
