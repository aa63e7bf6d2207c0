"""Tiny EAGLE-3 drafts (architecture `eagle3`) for a tiny target.

Shapes and keys follow llama.cpp's `llama_model_eagle3` (src/models/eagle3.cpp) and what
convert_hf_to_gguf writes for an EAGLE-3 checkpoint (conversion/llama.py, is_eagle3), laid
out like the common Llama-3.1-8B EAGLE-3 drafts:

- One decoder block whose attention reads [input_layernorm(token embedding) ;
  hidden_norm(g)] (2 * n_embd wide): attn_norm, attn_norm_2 (hidden_norm), attn_q/k/v,
  attn_output, ffn_norm, ffn_gate/up/down.
- `fc.weight` fuses three of the target's hidden states (3 * target_hidden_size wide) into
  g; llama.cpp runs it as an ENCODE pass and exposes g as the context's nextn embeddings.
- `target_layers` (exactly three ids) names the target layers whose *inputs* are read
  (llama_set_embeddings_layer_inp); an id equal to the target's layer count means its
  final-norm output (nextn embeddings), which only some targets expose. The converter
  writes [2, n/2, n - 3] for an n-layer target.
- No token_embd: the draft embeds with the target's (so its context needs `ctx_other`).
- A reduced draft vocabulary: `output.weight` has one row per draft token and the I64
  tensor `d2t` gives each row's absolute target token id (the converter adds the
  checkpoint's offsets to arange); llama.cpp scatters the logits to the target's
  vocabulary, -inf elsewhere.
- The target's tokenizer, `target_hidden_size`, `norm_before_residual` and
  `norm_before_fc` (both false, written as the converter does).

The default target is tinymodels' llama model (TinySpec(seed=1): 2 layers, n_embd 64),
whose graph exposes every layer's input; llama's graph has no nextn output, so its ids
stay below its layer count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from specchat.tinyarch.weights import WeightMaker
from specchat.tinymodels import TinySpec, finish_gguf, vocabulary

#: The default target: tinymodels' llama target.
TINY_LLAMA_TARGET = TinySpec(seed=1)


def default_target_layers(n_layer: int) -> list[int]:
    """The converter's choice of target layers ([2, n/2, n - 3]), or for a target too
    shallow for it, its first, middle and last layer inputs."""
    if n_layer >= 6:
        return [2, n_layer // 2, n_layer - 3]
    return [0, n_layer // 2, n_layer - 1]


def draft_vocabulary_ids(n_specials: int = 3) -> list[int]:
    """The target token ids the tiny draft vocabulary keeps: the special tokens, newline,
    printable ASCII and the merges, in id order (as a trained d2t keeps the frequent ones)."""
    tokens = vocabulary()[0]
    byte_ids = [n_specials + 10] + [n_specials + b for b in range(32, 127)]
    merges = list(range(n_specials + 256, len(tokens)))
    return list(range(n_specials)) + byte_ids + merges


def write_tiny_eagle3(
    path: Path,
    *,
    seed: int = 21,
    target: TinySpec = TINY_LLAMA_TARGET,
    target_layers: Sequence[int] | None = None,
    n_embd: int = 64,
    n_head: int = 4,
    n_head_kv: int = 2,
    n_ff: int = 128,
    reduced_vocab: bool = True,
    name: str = "tiny-eagle3",
    overrides: Mapping[str, np.ndarray] | None = None,
) -> Path:
    """Write an EAGLE-3 draft for the tinymodels target `target` and return `path`.

    `target_layers` defaults to default_target_layers(target.n_layer). `reduced_vocab`
    writes an output head over draft_vocabulary_ids() with its d2t map; without it the head
    covers the whole vocabulary and no d2t is written. `overrides` replace tensors of the
    seeded ones by name (a test's hand-made weights).
    """
    import gguf  # imported here: only tests and the self-test need the writer

    layers = list(target_layers or default_target_layers(target.n_layer))
    if len(layers) != 3:
        raise ValueError("EAGLE-3 reads exactly three target layers")
    vocab = vocabulary(
        target.vocab_variant, specials=target.special_tokens, special_type=target.special_type
    )
    n_vocab = len(vocab[0])
    draft_ids = draft_vocabulary_ids(len(target.special_tokens)) if reduced_vocab else None
    n_out = len(draft_ids) if draft_ids else n_vocab

    make = WeightMaker(seed)
    head_dim = n_embd // n_head
    tensors: dict[str, np.ndarray] = {
        "fc.weight": make.mat(n_embd, 3 * target.n_embd),
        "blk.0.attn_norm.weight": make.ones(n_embd),
        "blk.0.attn_norm_2.weight": make.ones(n_embd),
        "blk.0.attn_q.weight": make.mat(n_head * head_dim, 2 * n_embd),
        "blk.0.attn_k.weight": make.mat(n_head_kv * head_dim, 2 * n_embd),
        "blk.0.attn_v.weight": make.mat(n_head_kv * head_dim, 2 * n_embd),
        "blk.0.attn_output.weight": make.mat(n_embd, n_head * head_dim),
        "blk.0.ffn_norm.weight": make.ones(n_embd),
        "blk.0.ffn_gate.weight": make.mat(n_ff, n_embd),
        "blk.0.ffn_up.weight": make.mat(n_ff, n_embd),
        "blk.0.ffn_down.weight": make.mat(n_embd, n_ff),
        "output_norm.weight": make.ones(n_embd),
        "output.weight": make.output_head(n_out, n_embd, target.logit_scale),
    }
    if draft_ids:
        tensors["d2t"] = np.array(draft_ids, dtype=np.int64)
    tensors.update(overrides or {})

    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), "eagle3")
    writer.add_name(name)
    writer.add_context_length(target.n_ctx)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(1)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_rope_dimension_count(head_dim)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(n_vocab)
    # Spelled out: the gguf package in the environment may predate these writer methods.
    writer.add_array("eagle3.target_layers", layers)
    writer.add_uint32("eagle3.target_hidden_size", target.n_embd)
    writer.add_bool("eagle3.norm_before_residual", False)
    writer.add_bool("eagle3.norm_before_fc", False)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    finish_gguf(
        writer, vocab, eos_id=target.eos_id, chat_template=target.chat_template, tensors=tensors
    )
    return path
