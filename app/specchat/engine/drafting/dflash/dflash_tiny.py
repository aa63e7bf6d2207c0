"""Tiny DFlash drafts (architecture `dflash`) for a tiny qwen35 target.

Shapes and keys follow llama.cpp's `llama_model_dflash` (src/models/dflash.cpp, the plain
DFlash path: no DSpark Markov head, no DFlash2 selector) and what convert_hf_to_gguf
writes for a DFlash checkpoint (conversion/qwen.py: DFlashModel), laid out like the
Qwen3.5 DFlash drafts:

- A stack of Qwen3-style blocks (attn_norm, attn_q/k/v, attn_q_norm, attn_k_norm,
  attn_output, ffn_norm, ffn_gate/up/down) that denoise a block of
  [last token, mask, mask, ...] at once, attending (non-causally) to K/V computed from the
  target's hidden states.
- `fc.weight` fuses the target hidden states (len(target_layers) * n_embd wide; the draft
  is as wide as its target) and `enc.output_norm.weight` norms the result; a DECODE of an
  embeddings-only batch of those features writes every layer's K/V at the target's
  positions.
- `dflash.target_layers` lists target layer ids whose *inputs* are read
  (llama_set_embeddings_layer_inp); the converter writes the checkpoint's
  target_layer_ids + 1 (the input of layer i + 1 is the output of layer i).
- `dflash.block_size` (16) is the trained block; `tokenizer.ggml.mask_token_id` the token
  the block is padded with.
- No token_embd and no output.weight: the draft embeds and predicts with the target's
  (its context needs `ctx_other`).
- For an M-RoPE target such as qwen35 the draft carries degenerate
  `rope.dimension_sections` [head_dim / 2, 0, 0, 0], which makes llama.cpp rope it as
  M-RoPE on the temporal positions (llama_model_rope_type); embeddings batches then carry
  four positions per row ({p, p, p, 0}).

The tiny vocabulary has no reserved token to serve as the mask, so `mask_token_id`
defaults to its first control token (<|endoftext|>); real drafts name an unused reserved one.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from specchat.tinyarch.qwen35 import Qwen35Shape
from specchat.tinyarch.weights import WeightMaker
from specchat.tinymodels import CHATML_TEMPLATE, finish_gguf, vocabulary

#: The trained block size of the released DFlash drafts.
BLOCK_SIZE = 16

#: The default target: write_tiny_qwen35's trunk.
QWEN35_TARGET = Qwen35Shape()


def write_tiny_dflash(
    path: Path,
    *,
    seed: int = 31,
    target: Qwen35Shape = QWEN35_TARGET,
    target_layers: Sequence[int] = (1, 3),
    n_layer: int = 2,
    n_head: int = 4,
    n_head_kv: int = 2,
    head_dim: int = 16,
    n_ff: int = 128,
    mask_token_id: int = 0,
    name: str = "tiny-dflash",
) -> Path:
    """Write a DFlash draft for a tiny qwen35 target of shape `target` and return `path`.

    `target_layers` are the target layers whose inputs feed the draft (each below the
    target's trunk layer count); the default reads the outputs of its first and third
    layers, as a 32-layer target's [2, 9, 16, 23, 30] spreads over its depth.
    """
    import gguf  # imported here: only tests and the self-test need the writer

    layers = list(target_layers)
    if not layers or max(layers) >= target.n_layer or min(layers) < 0:
        raise ValueError(f"target layers must lie in 0..{target.n_layer - 1}")
    vocab = vocabulary()
    make = WeightMaker(seed)
    e = target.n_embd
    tensors: dict[str, np.ndarray] = {
        "fc.weight": make.mat(e, len(layers) * e),
        "enc.output_norm.weight": make.ones(e),
        "output_norm.weight": make.ones(e),
    }
    for layer in range(n_layer):
        p = f"blk.{layer}."
        tensors.update(
            {
                p + "attn_norm.weight": make.ones(e),
                p + "attn_q.weight": make.mat(n_head * head_dim, e),
                p + "attn_k.weight": make.mat(n_head_kv * head_dim, e),
                p + "attn_v.weight": make.mat(n_head_kv * head_dim, e),
                p + "attn_q_norm.weight": make.ones(head_dim),
                p + "attn_k_norm.weight": make.ones(head_dim),
                p + "attn_output.weight": make.mat(e, n_head * head_dim),
                p + "ffn_norm.weight": make.ones(e),
                p + "ffn_gate.weight": make.mat(n_ff, e),
                p + "ffn_up.weight": make.mat(n_ff, e),
                p + "ffn_down.weight": make.mat(e, n_ff),
            }
        )

    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), "dflash")
    writer.add_name(name)
    writer.add_context_length(target.n_ctx)
    writer.add_embedding_length(e)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_rope_freq_base(10_000_000.0)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_dimension_sections([head_dim // 2, 0, 0, 0])
    writer.add_layer_norm_rms_eps(1e-6)
    # Spelled out: the gguf package in the environment may predate these writer methods.
    writer.add_uint32("dflash.block_size", BLOCK_SIZE)
    writer.add_array("dflash.target_layers", layers)
    writer.add_mask_token_id(mask_token_id)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    finish_gguf(writer, vocab, eos_id=2, chat_template=CHATML_TEMPLATE, tensors=tensors)
    return path
