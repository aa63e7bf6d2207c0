"""The KV cache type is a choice: the engine, the CLI and the bench take it and say which."""

from __future__ import annotations

from pathlib import Path

import pytest

from specchat import settings as cfg
from specchat.bench.live.kv_noise import cache_noise
from specchat.bench.prompts import load_prompts
from specchat.bench.reports.report import _kv_cache_lines
from specchat.cli import main
from specchat.engine.session import ChatEngine
from specchat.engine.types import KV_CACHES
from specchat.models.optimise import optimise
from specchat.tinymodels import TinySpec, write_tiny_model
from tests.commands.test_serve_cli import start_serve, stop_serve
from tests.helpers.api_server import request


@pytest.fixture(scope="module")
def wide_q4_0(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Q4_0 target whose heads of 32 a Q8_0 block fits (the standard tiny heads do not)."""
    folder = tmp_path_factory.mktemp("wide-kv")
    source = write_tiny_model(folder / "wide.gguf", TinySpec(n_head=2, name="tiny-wide-heads"))
    return optimise(source, output=folder / "wide.q4_0.gguf").path


def test_the_setting_and_the_engine_offer_the_same_caches() -> None:
    assert cfg.KV_CACHE.allowed() == KV_CACHES == ("q8_0", "f16")
    assert cfg.KV_CACHE.default == "q8_0"


@pytest.mark.parametrize(("cache", "keys"), [("q8_0", "Q8_0"), ("f16", "F16")])
def test_the_engine_stores_keys_as_the_cache_chosen(wide_q4_0: Path, cache: str, keys: str) -> None:
    engine = ChatEngine.load(wide_q4_0, n_ctx=512, kv_cache=cache)
    try:
        assert engine.target.info.key_type == keys
    finally:
        engine.close()


def test_an_unknown_cache_is_refused(wide_q4_0: Path) -> None:
    with pytest.raises(ValueError, match="unknown KV cache 'q4'"):
        ChatEngine.load(wide_q4_0, kv_cache="q4")


def test_generate_takes_the_cache(wide_q4_0: Path, capsys: pytest.CaptureFixture[str]) -> None:
    common = ["generate", "--target", str(wide_q4_0), "--n-ctx", "256", "--max-tokens", "4"]
    assert main([*common, "--kv-cache", "f16", "--mode", "plain", "--prompt", "hi"]) == 0
    with pytest.raises(SystemExit) as refused:
        main([*common, "--kv-cache", "q4", "--prompt", "hi"])
    assert refused.value.code == 2
    assert "invalid choice: 'q4'" in capsys.readouterr().err


def test_serve_takes_the_cache(wide_q4_0: Path) -> None:
    options = ["--target", str(wide_q4_0), "--ctx", "256", "--threads", "1", "--kv-cache", "f16"]
    process, address, lines = start_serve(options, model_id=wide_q4_0.stem)
    try:
        assert any("keys stored as F16" in line for line in lines), "".join(lines)
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
        assert request(address, "POST", "/v1/chat/completions", body).status == 200
    finally:
        stop_serve(process)


def test_the_bench_reports_the_cache_and_the_batch_noise_of_each(wide_q4_0: Path) -> None:
    measured = cache_noise(wide_q4_0, load_prompts()[:3], in_use="f16", n_threads=2)
    caches = measured["caches"]
    assert isinstance(caches, dict)
    assert [caches[c]["key_type"] for c in KV_CACHES] == ["Q8_0", "F16"]
    # Q8_0 keys on a Q4_0 model: a batch's rows equal single ones (docs/formats.md).
    assert set(caches["q8_0"]["batch_noise"].values()) == {0.0}
    assert all(v >= 0 for v in caches["f16"]["batch_noise"].values())
    lines = "\n".join(_kv_cache_lines(measured))
    assert "This run: `--kv-cache f16` (F16 keys)" in lines
    assert "| q8_0 (Q8_0 keys) | 0.0000 |" in lines
