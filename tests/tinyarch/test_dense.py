"""Dense llama and qwen2 layouts (Llama 3.x, Qwen2.5): llama.cpp loads them, runs them, and
drafts for one with the other."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from specchat.engine.decoding.decoder import SpeculativeDecoder
from specchat.engine.drafting.base import LoadedPair
from specchat.engine.llamacpp.model import LlamaModel
from specchat.models.gguf_reader import validate
from specchat.tinyarch import DenseShape, write_tiny_dense
from tests.helpers.engine import CHAT_PROMPTS, run


def test_grouped_query_attention_and_a_tied_head_load_and_run(tmp_path: Path) -> None:
    shape = DenseShape(n_embd=128, n_layer=2, n_head=8, n_head_kv=2, n_ff=256, tied_output=True)
    path = write_tiny_dense(tmp_path / "llama.gguf", shape=shape)
    names = {tensor.name for tensor in validate(path).tensors}
    assert "output.weight" not in names and "token_embd.weight" in names
    with LlamaModel(path, n_ctx=256, n_threads=1) as model:
        logits = model.decode(model.tokenize("hello there"), logits="all")
        assert np.isfinite(logits).all() and logits.shape[1] == model.n_vocab


def test_qwen2_carries_qkv_biases_and_drafts_for_itself_as_plain(tmp_path: Path) -> None:
    shape = DenseShape(arch="qwen2", n_embd=64, n_layer=2, n_head=4, n_head_kv=2, n_ff=128)
    target = write_tiny_dense(tmp_path / "qwen2.gguf", shape=shape)
    draft = write_tiny_dense(tmp_path / "qwen2-draft.gguf", seed=2, shape=shape)
    names = {tensor.name for tensor in validate(target).tensors}
    assert {"blk.0.attn_q.bias", "blk.0.attn_k.bias", "blk.0.attn_v.bias"} <= names
    with (
        LlamaModel(target, n_ctx=512, n_threads=1) as model,
        LlamaModel(draft, n_ctx=512, n_threads=1) as drafting,
    ):
        decoder = SpeculativeDecoder(LoadedPair.of(model, drafting))
        prompt = model.tokenize(CHAT_PROMPTS[0])
        plain = run(decoder, prompt, mode="plain", max_tokens=40)
        spec = run(decoder, prompt, mode="draft", k=3, max_tokens=40)
        assert spec.tokens == plain.tokens
        assert sum(r.drafted for r in spec.rounds) > 0
