"""The tiny gemma4 target loads in llama.cpp and writes varied text, and its gemma4-assistant
drafts in a context created beside the target's, sharing the target's KV cache and fed its
last hidden state (as common/speculative.cpp's MTP driver runs Gemma 4 assistants)."""

from __future__ import annotations

from collections.abc import Iterator

import llama_cpp
import numpy as np
import pytest

from specchat.engine.llamacpp.model import LlamaModel
from specchat.tinyarch.gemma4 import ASSISTANT_SHAPE, Gemma4Shape
from tests.helpers import llama_ext
from tests.helpers.greedy import agreement, greedy_tokens
from tests.tinyarch.conftest import TinyArchFiles

PROMPT = "<|im_start|>user\nWrite a poem about the sea<|im_end|>\n<|im_start|>assistant\n"


@pytest.fixture(scope="module")
def target(tiny_arch: TinyArchFiles) -> Iterator[LlamaModel]:
    model = LlamaModel(tiny_arch.gemma4, n_ctx=512, n_threads=1)
    yield model
    model.close()


def test_the_target_loads_and_writes_varied_text(target: LlamaModel) -> None:
    assert target.info.description.startswith("gemma4")
    assert target.info.n_layers == Gemma4Shape().n_layer
    assert target.info.key_type == "Q8_0"  # head sizes are whole Q8_0 blocks
    _, chosen = greedy_tokens(target, PROMPT)
    assert len(chosen) == 60 and not target.is_eog(chosen[-1])
    assert len(set(chosen)) >= 15


def test_a_perturbed_copy_drafts_it_closely_but_not_exactly(
    target: LlamaModel, tiny_arch: TinyArchFiles
) -> None:
    with LlamaModel(tiny_arch.gemma4_close, n_ctx=512, n_threads=1) as draft:
        share = agreement(target, draft, PROMPT)
    assert 0.6 <= share < 1.0


def test_the_assistant_is_all_nextn_blocks_and_needs_its_target(
    tiny_arch: TinyArchFiles,
) -> None:
    with llama_ext.loaded(tiny_arch.gemma4_assistant) as model:
        assert llama_cpp.llama_model_n_layer(model) == 0
        assert llama_cpp.llama_model_n_layer_nextn(model) == ASSISTANT_SHAPE.n_layer
        # "Gemma4Assistant requires ctx_other to be set"
        assert not llama_cpp.llama_init_from_model(model, llama_ext.context_params())


def test_the_assistant_drafts_from_the_targets_cache_and_hidden_state(
    target: LlamaModel, tiny_arch: TinyArchFiles
) -> None:
    target.reset()
    ctx = target.context
    n_target_embd = Gemma4Shape().n_embd
    llama_ext.set_embeddings_nextn(ctx, True, masked=False)
    try:
        tokens = target.tokenize(PROMPT)
        first = int(np.argmax(target.decode(tokens)[-1]))
        hidden = llama_ext.embeddings_nextn_ith(ctx, len(tokens) - 1, n_target_embd)
        with (
            llama_ext.loaded(tiny_arch.gemma4_assistant) as model,
            llama_ext.context(
                model, ctx_type=llama_cpp.LLAMA_CONTEXT_TYPE_MTP, ctx_other=ctx
            ) as assistant_ctx,
        ):
            assert llama_ext.ctx_other(assistant_ctx) == ctx
            llama_ext.set_embeddings_nextn(assistant_ctx, True, masked=True)
            # With a shared cache every draft step sits at the position of `first`.
            batch = llama_ext.ExtBatch(assistant_ctx)
            try:
                batch.add_token(first, len(tokens), embd=hidden, output=True)
                assert batch.process() == 0
            finally:
                batch.close()
            drafted = llama_ext.logits(assistant_ctx, target.n_vocab)
            next_hidden = llama_ext.embeddings_nextn_ith(assistant_ctx, -1, n_target_embd)
    finally:
        llama_ext.set_embeddings_nextn(ctx, False, masked=True)
        target.reset()
    assert np.isfinite(drafted).all() and drafted.std() > 1.0
    # post_projection maps the assistant's state back to the target's width
    assert np.isfinite(next_hidden).all() and np.linalg.norm(next_hidden) > 0
