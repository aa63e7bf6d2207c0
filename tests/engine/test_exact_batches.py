"""A verify pass's rows equal the same positions decoded one at a time, at a conversation's
length, on a CPU with a Q4_0 model: the keys are stored as Q8_0 (engine/llamacpp/model.py,
EXACT_KEY_TYPE) so llama.cpp's attention for one token takes the path a batch takes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from specchat.bench.live.quality import batch_noise
from specchat.engine.decoding.decoder import SpeculativeDecoder
from specchat.engine.drafting.base import LoadedPair
from specchat.engine.llamacpp.kv_store import KVStore
from specchat.engine.llamacpp.model import LlamaModel
from specchat.models.optimise import optimise
from specchat.tinymodels import TinyModels, TinySpec, write_tiny_model
from tests.helpers.engine import run

#: Two heads of 32 over 64 dimensions: a head a Q8_0 block (32 values) fits, unlike the
#: standard tiny models' heads of 16.
WIDE_HEADS = TinySpec(n_head=2, name="tiny-wide-heads")

#: Past the 512 keys from which llama.cpp's CPU attention for one token splits the keys
#: across threads.
LONG = 600


@pytest.fixture(scope="module")
def wide_q4_0(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(a Q4_0 target whose heads Q8_0 keys fit, a draft close to it)."""
    folder = tmp_path_factory.mktemp("wide-heads")
    source = write_tiny_model(folder / "wide.gguf", WIDE_HEADS)
    target = optimise(source, output=folder / "wide.q4_0.gguf").path
    draft = write_tiny_model(
        folder / "wide-draft.gguf", TinySpec(n_head=2, perturb=0.15, name="tiny-wide-draft")
    )
    return target, draft


@pytest.fixture(scope="module")
def long_text() -> str:
    return Path(__file__).read_text(encoding="utf-8") * 3


def test_keys_are_q8_0_on_a_cpu_and_f16_where_a_head_does_not_fill_a_block(
    wide_q4_0: tuple[Path, Path], tiny_models: TinyModels
) -> None:
    with (
        LlamaModel(wide_q4_0[0], n_ctx=1024) as wide,
        LlamaModel(wide_q4_0[0], n_ctx=1024, exact_keys=False) as default,
    ):
        assert wide.info.key_type == "Q8_0" and default.info.key_type == "F16"
        # Q8_0 keys take 34 bytes per 32 values where F16 takes 64.
        assert wide.info.kv_bytes_per_token < default.info.kv_bytes_per_token
    with LlamaModel(tiny_models.target, n_ctx=1024) as narrow:
        assert narrow.info.key_type == "F16"  # heads of 16: llama.cpp's default, still loads
        assert narrow.decode(narrow.tokenize("hello"), logits="last").shape[0] == 1


def test_batched_rows_are_bit_identical_to_single_ones_after_a_long_context(
    wide_q4_0: tuple[Path, Path], long_text: str
) -> None:
    with LlamaModel(wide_q4_0[0], n_ctx=1024, n_threads=2) as model:
        context = model.tokenize(long_text)
        noise = batch_noise(model, context, sizes=(2, 4, 8, 16, 32), cached=LONG)
        assert model.n_past == LONG
        assert all(v == 0.0 for v in noise.values()), noise
    # What the Q8_0 keys avoid: with llama.cpp's default F16 keys, one token's attention over
    # 512 or more keys is split across the threads and its rows part from a batch's.
    with LlamaModel(wide_q4_0[0], n_ctx=1024, n_threads=2, exact_keys=False) as model:
        noise = batch_noise(model, model.tokenize(long_text), sizes=(2, 4), cached=LONG)
        assert max(noise.values()) > 0.01, noise


@pytest.fixture(scope="module")
def decoder(wide_q4_0: tuple[Path, Path]) -> Iterator[SpeculativeDecoder]:
    target_path, draft_path = wide_q4_0
    with (
        LlamaModel(target_path, n_ctx=1024, n_threads=2) as target,
        LlamaModel(draft_path, n_ctx=1024, n_threads=2) as draft,
    ):
        yield SpeculativeDecoder(LoadedPair.of(target, draft))


@pytest.mark.parametrize("mode", ["lookup", "suffix", "draft", "auto"])
def test_greedy_output_equals_plain_exactly_after_a_long_prompt(
    decoder: SpeculativeDecoder, long_text: str, mode: str
) -> None:
    prompt = decoder.target.tokenize(long_text)[:LONG]
    plain = run(decoder, prompt, mode="plain", max_tokens=96)
    spec = run(decoder, prompt, mode=mode, k=8, max_tokens=96)
    assert sum(r.drafted for r in spec.rounds) > 0  # it did verify in batches
    assert spec.tokens == plain.tokens


def test_a_state_kept_with_f16_keys_is_not_loaded_into_q8_0_keys(
    wide_q4_0: tuple[Path, Path], long_text: str, tmp_path: Path
) -> None:
    store = KVStore(tmp_path / "kv")
    with LlamaModel(wide_q4_0[0], n_ctx=1024, exact_keys=False) as old:
        prompt = old.tokenize(long_text)[:200]
        old.decode(prompt, logits="none")
        assert store.save(old, "chat") > 0
    with LlamaModel(wide_q4_0[0], n_ctx=1024) as new:
        assert new.info.key_type == "Q8_0"
        assert store.restore(new, "chat", prompt) == 0  # another cache layout: re-read
        new.decode(prompt, logits="none")
        assert store.save(new, "chat") > 0
    with LlamaModel(wide_q4_0[0], n_ctx=1024) as again:
        assert store.restore(again, "chat", prompt) == len(prompt)
