"""The tiny EAGLE-3 draft loads in llama.cpp and drafts beside its target (tinymodels'
llama model): the target's layer inputs fused by the ENCODE pass into g, then a DECODE of
(token, g) whose logits cover only the draft vocabulary, scattered through d2t (as
common/speculative.cpp's EAGLE-3 driver runs it)."""

from __future__ import annotations

import llama_cpp
import numpy as np

from specchat.engine.drafting.eagle3.eagle3_tiny import default_target_layers, draft_vocabulary_ids
from specchat.engine.llamacpp.model import LlamaModel
from specchat.tinymodels import TinySpec
from tests.helpers import llama_ext
from tests.tinyarch.conftest import TinyArchFiles

PROMPT = "<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n"


def test_the_draft_needs_its_target_for_token_embeddings(tiny_arch: TinyArchFiles) -> None:
    with llama_ext.loaded(tiny_arch.eagle3) as model:
        # "eagle3 requires ctx_other to be set": it has no token_embd of its own
        assert not llama_cpp.llama_init_from_model(model, llama_ext.context_params())


def test_the_draft_drafts_beside_its_target(tiny_arch: TinyArchFiles) -> None:
    spec = TinySpec(seed=1)
    layers = default_target_layers(spec.n_layer)
    with LlamaModel(tiny_arch.llama, n_ctx=512, n_threads=1) as target:
        ctx = target.context
        for layer in set(layers):
            llama_ext.set_embeddings_layer_inp(ctx, layer, True)
        tokens = target.tokenize(PROMPT)
        first = int(np.argmax(target.decode(tokens)[-1]))
        features = np.concatenate(
            [llama_ext.embeddings_layer_inp(ctx, i, len(tokens), spec.n_embd) for i in layers],
            axis=1,
        )
        with (
            llama_ext.loaded(tiny_arch.eagle3) as model,
            llama_ext.context(model, ctx_other=ctx) as draft_ctx,
        ):
            n_embd = llama_cpp.llama_model_n_embd(model)
            llama_ext.set_embeddings_nextn(draft_ctx, True, masked=True)
            batch = llama_ext.ExtBatch(draft_ctx)
            try:
                for pos, row in enumerate(features):
                    batch.add_embd(row, pos, output=True)
                assert batch.process(llama_cpp.LLAMA_PROCESS_TYPE_ENCODE) == 0
                g = llama_ext.embeddings_nextn(draft_ctx, len(tokens), n_embd)
                # (token[P + 1], g[P]) at position P: the sampled token pairs with the
                # prompt's last g
                batch.add_token(first, len(tokens) - 1, embd=g[-1], output=True)
                assert batch.process() == 0
            finally:
                batch.close()
            drafted = llama_ext.logits(draft_ctx, target.n_vocab)
    assert np.isfinite(g).all()
    in_draft_vocab = np.zeros(target.n_vocab, dtype=bool)
    in_draft_vocab[draft_vocabulary_ids()] = True
    assert np.isfinite(drafted[in_draft_vocab]).all()
    assert np.isneginf(drafted[~in_draft_vocab]).all()
    assert in_draft_vocab[int(np.argmax(drafted))]
