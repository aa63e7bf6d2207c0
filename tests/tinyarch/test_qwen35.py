"""The tiny qwen35 hybrids load in llama.cpp and behave like Qwen3.5 / 3.6 there: hybrid
memory with native recurrent rollback snapshots, and an MTP head that drafts in a second
context beside the target's, fed the target's last hidden state (as common/speculative.cpp's
MTP driver does)."""

from __future__ import annotations

from collections.abc import Iterator

import llama_cpp
import numpy as np
import pytest

from specchat.engine.llamacpp.model import LlamaModel
from specchat.engine.llamacpp.recurrent_state import Rollback
from tests.helpers import llama_ext
from tests.helpers.greedy import agreement, greedy_tokens
from tests.tinyarch.conftest import TinyArchFiles

PROMPT = "<|im_start|>user\nWrite a poem about the sea<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def target(tiny_arch: TinyArchFiles) -> Iterator[LlamaModel]:
    model = LlamaModel(tiny_arch.qwen35_mtp, n_ctx=512, n_threads=1)
    yield model
    model.close()


def test_the_target_loads_as_a_hybrid_and_writes_varied_text(target: LlamaModel) -> None:
    assert target.info.description.startswith("qwen35")
    assert target.rollback is Rollback.SNAPSHOTS  # llama.cpp's recurrent snapshots
    _, chosen = greedy_tokens(target, PROMPT)
    assert len(chosen) == 60 and not target.is_eog(chosen[-1])
    assert len(set(chosen)) >= 20


def test_the_mtp_block_counts_in_block_count_but_not_in_n_layer(target: LlamaModel) -> None:
    assert target.metadata("qwen35.block_count") == "5"
    assert target.metadata("qwen35.nextn_predict_layers") == "1"
    assert target.info.n_layers == 4  # llama_model_n_layer: the trunk only


def test_the_mtp_block_leaves_the_trunk_as_it_is(
    target: LlamaModel, tiny_arch: TinyArchFiles
) -> None:
    tokens = target.tokenize(PROMPT)
    target.reset()
    with LlamaModel(tiny_arch.qwen35_plain, n_ctx=512, n_threads=1) as plain:
        assert np.array_equal(target.decode(tokens), plain.decode(tokens))


def test_a_perturbed_copy_drafts_it_closely_but_not_exactly(
    target: LlamaModel, tiny_arch: TinyArchFiles
) -> None:
    with LlamaModel(tiny_arch.qwen35_close, n_ctx=512, n_threads=1) as draft:
        share = agreement(target, draft, PROMPT)
    assert 0.6 <= share < 1.0


def test_a_context_keeps_recurrent_snapshots_for_rollback(tiny_arch: TinyArchFiles) -> None:
    with (
        llama_ext.loaded(tiny_arch.qwen35_plain) as model,
        llama_ext.context(model, n_rs_seq=4) as ctx,
    ):
        assert llama_cpp.llama_model_is_hybrid(model)
        assert llama_cpp.llama_n_rs_seq(ctx) == 4


def test_the_mtp_head_drafts_beside_the_target_from_its_hidden_state(
    tiny_arch: TinyArchFiles,
) -> None:
    with llama_ext.loaded(tiny_arch.qwen35_mtp, load_mtp=True) as model:
        assert llama_cpp.llama_model_n_layer_nextn(model) == 1
        n_embd = llama_cpp.llama_model_n_embd(model)
        n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model))
        tokens = [40, 72, 101, 108, 111]
        with (
            llama_ext.context(model) as ctx,
            llama_ext.context(
                model, ctx_type=llama_cpp.LLAMA_CONTEXT_TYPE_MTP, ctx_other=ctx
            ) as mtp_ctx,
        ):
            # Only gemma4-assistant keeps ctx_other (and shares the target's cache): the
            # qwen35 MTP context caches its own block, so the driver must catch it up.
            assert llama_ext.ctx_other(mtp_ctx) is None
            llama_ext.set_embeddings_nextn(ctx, True, masked=False)
            llama_ext.set_embeddings_nextn(mtp_ctx, True, masked=True)
            llama_ext.decode_prompt(ctx, tokens)
            hidden = llama_ext.embeddings_nextn(ctx, len(tokens), n_embd)
            assert np.isfinite(hidden).all()
            first = int(np.argmax(llama_ext.logits(ctx, n_vocab)))

            # Catch up on the prompt, each token paired with the hidden state before it,
            # then draft the token after `first` from the prompt's last hidden state.
            batch = llama_ext.ExtBatch(mtp_ctx, n_pos=4)  # qwen35 ropes as M-RoPE
            try:
                for pos, token in enumerate(tokens):
                    before = hidden[pos - 1] if pos else np.zeros(n_embd, dtype=np.float32)
                    batch.add_token(token, pos, embd=before)
                assert batch.process() == 0
                batch.add_token(first, len(tokens), embd=hidden[-1], output=True)
                assert batch.process() == 0
            finally:
                batch.close()
            drafted = llama_ext.logits(mtp_ctx, n_vocab)
            next_hidden = llama_ext.embeddings_nextn_ith(mtp_ctx, -1, n_embd)
    assert np.isfinite(drafted).all() and drafted.std() > 1.0
    assert np.isfinite(next_hidden).all() and np.linalg.norm(next_hidden) > 0
