"""The tiny DFlash draft loads in llama.cpp and drafts beside its qwen35 target: the
target's layer inputs written into the draft's cache by a DECODE of embeddings rows, then
one block [last token, mask, ...] denoised at once (as common/speculative.cpp's DFlash
driver runs it)."""

from __future__ import annotations

import llama_cpp
import numpy as np

from specchat.engine.drafting.dflash.dflash_tiny import BLOCK_SIZE
from specchat.engine.llamacpp.model import LlamaModel
from specchat.tinyarch.qwen35 import Qwen35Shape
from tests.helpers import llama_ext
from tests.tinyarch.conftest import TinyArchFiles

PROMPT = "<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n"
TARGET_LAYERS = (1, 3)  # write_tiny_dflash's default


def test_the_draft_ropes_like_its_target_and_needs_it(tiny_arch: TinyArchFiles) -> None:
    with llama_ext.loaded(tiny_arch.dflash) as model:
        assert llama_cpp.llama_model_rope_type(model) == llama_cpp.LLAMA_ROPE_TYPE_MROPE
        assert llama_cpp.llama_vocab_mask(llama_cpp.llama_model_get_vocab(model)) == 0
        # "dflash requires ctx_other to be set": no token_embd, no output head
        assert not llama_cpp.llama_init_from_model(model, llama_ext.context_params())


def test_the_draft_denoises_a_block_beside_its_target(tiny_arch: TinyArchFiles) -> None:
    n_embd = Qwen35Shape().n_embd
    with LlamaModel(tiny_arch.qwen35_plain, n_ctx=512, n_threads=1) as target:
        ctx = target.context
        for layer in TARGET_LAYERS:
            llama_ext.set_embeddings_layer_inp(ctx, layer, True)
        tokens = target.tokenize(PROMPT)
        first = int(np.argmax(target.decode(tokens)[-1]))
        features = np.concatenate(
            [llama_ext.embeddings_layer_inp(ctx, i, len(tokens), n_embd) for i in TARGET_LAYERS],
            axis=1,
        )
        with (
            llama_ext.loaded(tiny_arch.dflash) as model,
            llama_ext.context(model, ctx_other=ctx) as draft_ctx,
        ):
            llama_cpp.llama_set_causal_attn(draft_ctx, False)
            mask = llama_cpp.llama_vocab_mask(llama_cpp.llama_model_get_vocab(model))
            batch = llama_ext.ExtBatch(draft_ctx, n_pos=4)
            try:
                for pos, row in enumerate(features):
                    batch.add_embd(row, pos)
                assert batch.process() == 0  # fills the draft's cache, no output
                block = [first] + [mask] * (BLOCK_SIZE - 1)
                for offset, token in enumerate(block):
                    batch.add_token(token, len(tokens) + offset, output=True)
                assert batch.process() == 0
            finally:
                batch.close()
            drafted = np.stack(
                [llama_ext.logits(draft_ctx, target.n_vocab, i) for i in range(BLOCK_SIZE)]
            )
    assert np.isfinite(drafted).all() and drafted.std() > 1.0
