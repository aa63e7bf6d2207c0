"""`specchat bench --peers` end to end on the tiny pair, against the llama-server that
`make llama-tools` builds from the vendored llama.cpp (built here on first use)."""

from __future__ import annotations

import json
from pathlib import Path

import llama_cpp
import pytest

from specchat.bench.peers.configs import PYTHON_LOOKUP, PYTHON_PLAIN, SERVER_PLAIN, SPECCHAT_SERVE
from specchat.bench.peers.llama_server import find_llama_server
from specchat.bench.peers.server_process import PeerError
from specchat.cli import main
from specchat.tinymodels import TinyModels
from tests.helpers.llama_oracle import oracle_binary
from tests.helpers.tiny_bench import tiny_bench_argv

pytestmark = [pytest.mark.package, pytest.mark.timeout(3600)]


def _llama_server() -> Path:
    try:  # the one `make llama-tools` built with the Makefile's flags
        return find_llama_server(llama_cpp.__version__)
    except PeerError:
        return oracle_binary("llama-server")


def test_bench_peers_on_the_tiny_pair(
    tiny_models: TinyModels, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = tiny_bench_argv(
        tiny_models,
        tmp_path,
        *("--modes", "plain,auto", "--temperature", "0", "--max-tokens", "24"),
        # The tiny models' head size takes no Q8_0 keys: F16 on every side.
        *("--kv-cache", "f16", "--no-first-answer"),
        *("--peers", "--llama-server", str(_llama_server()), "--out", str(out)),
    )
    assert main(argv) in (0, 1)  # 1: a speed goal failed, as tiny random models may
    capsys.readouterr()
    peers = json.loads((out / "report.json").read_text(encoding="utf-8"))["peers"]
    assert peers["settings"]["key_type"] == "f16" and peers["settings"]["threads"] == 1
    per_set = peers["set"]
    expected = {
        "SpecChat plain",
        "SpecChat auto",
        *SPECCHAT_SERVE.values(),
        SERVER_PLAIN,
        "llama-server --spec-default",
        "llama-server draft-simple",
        "llama-server draft-simple n-max 2",
        "llama-server draft-simple n-max 4",
        "llama-server draft-simple n-max 8",
        PYTHON_PLAIN,
        PYTHON_LOOKUP,
    }
    assert set(per_set) == expected
    for name, row in per_set.items():
        assert row["errors"] == 0, (name, [r["error"] for r in peers["rows"]])
        assert row["tok_s"] and row["tok_s"] > 0, name
        assert row["speedup"] and 0.01 < row["speedup"] < 100, name
    assert per_set[SERVER_PLAIN]["speedup"] == pytest.approx(1.0)
    assert per_set[SERVER_PLAIN]["drafted"] == 0
    assert per_set[SPECCHAT_SERVE["plain"]]["drafted"] == 0  # its requests asked for plain
    # A draft that is the target lightly perturbed: draft-simple drafts, and keeps some.
    simple = per_set["llama-server draft-simple n-max 4"]
    assert simple["drafted"] > 0 and 0 < simple["accepted"] <= simple["drafted"]
    assert peers["best_draft_simple"] in {f"llama-server draft-simple n-max {n}" for n in (2, 4, 8)}

    # T = 0 with the same keys: where the server read the prompt SpecChat read (the same
    # template rendering), plain decoding is the same answer; llama-cpp-python decodes
    # SpecChat's own prompt tokens.
    specchat_prompt = {
        r["prompt"]: r["prompt_tokens"] for r in peers["rows"] if r["peer"] == "SpecChat plain"
    }
    for row in peers["rows"]:
        if row["peer"] in (PYTHON_PLAIN, PYTHON_LOOKUP, *SPECCHAT_SERVE.values()):
            assert row["equal_to_specchat_plain"] is True, row
        if row["peer"] in SPECCHAT_SERVE.values():
            assert row["prompt_tokens"] == specchat_prompt[row["prompt"]], row
        if row["peer"] == SERVER_PLAIN and row["prompt_tokens"] == specchat_prompt[row["prompt"]]:
            assert row["equal_to_specchat_plain"] is True, row
    assert any(
        r["peer"] == SERVER_PLAIN and r["prompt_tokens"] == specchat_prompt[r["prompt"]]
        for r in peers["rows"]
    ), "llama-server rendered no prompt as SpecChat does"
    markdown = (out / "report.md").read_text(encoding="utf-8")
    assert "## Peers: llama-server and llama-cpp-python" in markdown


def test_via_api_peers_on_the_tiny_pair(
    tiny_models: TinyModels, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`specchat serve` and every llama-server type through the same `openai` client."""
    out = tmp_path / "out"
    argv = tiny_bench_argv(
        tiny_models,
        tmp_path,
        *("--max-tokens", "16", "--kv-cache", "f16", "--via-api"),
        *("--peers", "--llama-server", str(_llama_server()), "--out", str(out)),
    )
    main(argv)  # 1: the API's overhead goal, which tiny models' microsecond passes miss
    assert "via-api-peers.json" in capsys.readouterr().out
    report = json.loads((out / "via-api-peers.json").read_text(encoding="utf-8"))
    assert not [a for a in report["answers"] if a["error"]]
    servers = {a["server"] for a in report["answers"]}
    assert {"specchat serve (auto)", SERVER_PLAIN, "llama-server draft-simple n-max 8"} <= servers
    assert report["best_llama_server"] in servers
    assert set(report["specchat_over_best"]) == {"edit", "chat"}
    assert all(a["tokens"] > 0 and a["tok_s"] > 0 for a in report["answers"])
