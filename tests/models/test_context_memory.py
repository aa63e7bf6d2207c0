"""A context's memory read from GGUF metadata (models/context_memory.py): on the Qwen3.5-4B
shape (the layout tools/write_proportional_models.py writes, with its large matrices left
as holes: no 4B file is loaded), the snapshots a loaded 4B target asks for and the state
copies the window's memory estimate counts; on the tiny hybrid, the same figures as
llama.cpp's own."""

from __future__ import annotations

from pathlib import Path

import llama_cpp
import pytest

from specchat.engine.costs.priors import MAX_K
from specchat.engine.llamacpp.model import LlamaModel
from specchat.engine.llamacpp.recurrent_state import PROMPT_ENDS, state_copies
from specchat.engine.session import ChatEngine
from specchat.models.context_memory import MEMORY_KEYS, context_memory
from specchat.models.gguf_reader import read_metadata
from specchat.settings import MAX_FIXED_K
from specchat.tinyarch import write_tiny_qwen35
from specchat.tinyarch.qwen35 import QWEN35_4B, Qwen35Shape
from specchat.tinyarch.weights import LayoutMaker

MIB = 1 << 20


def _memory(path: Path, key_type: str = "F16"):  # type: ignore[no-untyped-def]
    arch = read_metadata(path, keys={"general.architecture"}, arrays=False).architecture
    keys = {"general.architecture", *(f"{arch}.{key}" for key in MEMORY_KEYS)}
    return context_memory(read_metadata(path, keys=keys).values, key_type=key_type)


def test_the_4b_shape_counts_its_state_copies(tmp_path: Path) -> None:
    path = write_tiny_qwen35(tmp_path / "4b.gguf", mtp=True, shape=QWEN35_4B, maker=LayoutMaker)
    memory = _memory(path)
    # 24 Gated DeltaNet layers of (3 × 8192 + 128 × 4096) F32 values: 50.25 MiB a copy.
    assert memory.recurrent_layers == 24 and memory.state_bytes == 52_690_944
    # Eight full-attention layers and the MTP block: 4 KV heads of 256, F16 keys and values.
    assert memory.kv_bytes_per_token == 9 * 4 * 256 * 4
    # Snapshots for the longest draft a mode makes, and no more: the K slider's longest
    # and auto's for the drafts that drop by snapshots.
    assert MAX_FIXED_K <= MAX_K
    copies = state_copies(MAX_K, memory.state_bytes)
    assert copies == MAX_K + 1 + 1 + min(PROMPT_ENDS, 5)  # snapshots, round, prompt ends
    total = memory.total(32_768, state_copies=copies)
    assert total == 32_768 * memory.kv_bytes_per_token + copies * memory.state_bytes
    assert copies * memory.state_bytes > 1000 * MIB  # what the estimate used to leave out


@pytest.mark.parametrize("depth", [0, 4, MAX_K])
def test_a_loaded_hybrid_reports_its_state_copies(tmp_path: Path, depth: int) -> None:
    path = write_tiny_qwen35(tmp_path / "q.gguf", seed=1, mtp=False, shape=Qwen35Shape(n_layer=8))
    memory = _memory(path, key_type="Q8_0")
    with LlamaModel(path, n_ctx=512, n_threads=1, snapshot_depth=depth) as model:
        assert model.snapshot_depth == depth
        assert model.info.kv_bytes_per_token == memory.kv_bytes_per_token
        assert (
            model.info.state_bytes == state_copies(depth, memory.state_bytes) * memory.state_bytes
        )
        # One copy as llama.cpp keeps it once it holds tokens: the same, less its header.
        model.decode(model.tokenize("hello there"), logits="none")
        flags = llama_cpp.LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY
        real = int(llama_cpp.llama_state_seq_get_size_ext(model.context, 0, flags))
        assert 0 <= real - memory.state_bytes < 1024


def test_a_loaded_pair_asks_for_its_longest_drafts_snapshots(tmp_path: Path) -> None:
    path = write_tiny_qwen35(tmp_path / "q.gguf", seed=1, mtp=True)
    engine = ChatEngine.load(path, n_ctx=512, n_threads=1)
    try:
        assert engine.target.snapshot_depth == MAX_K
        longest = max(d.k_limit for d in engine.decoder.drafters if hasattr(d, "k_limit"))
        assert engine.target.snapshot_depth <= max(longest, MAX_FIXED_K)
        assert engine.target.info.state_bytes > 0
    finally:
        engine.close()
