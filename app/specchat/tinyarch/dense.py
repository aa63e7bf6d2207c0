"""Tiny dense transformers of the `llama` and `qwen2` architectures with grouped-query
attention: the layout of Llama 3.x (an 8B-class target, a 1B-class draft) and of Qwen2.5
(SpecChat's default pair), at any size.

Shapes and keys follow llama.cpp's `llama` and `qwen2` loaders (src/models/llama.cpp,
qwen2.cpp: load_arch_hparams, load_arch_tensors): per block attn_norm, attn_q/k/v/output,
ffn_norm, ffn_gate/up/down; qwen2 adds biases to q, k and v. A tied output head is the
token embedding (no output.weight), as in Llama 3.2 1B and Qwen2.5 0.5B and 1.5B.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specchat.tinyarch.weights import WeightMaker
from specchat.tinymodels import CHATML_TEMPLATE, finish_gguf, vocabulary

#: Tokens, token types and merges, as tinymodels.vocabulary() returns them.
Vocabulary = tuple[list[str], list[int], list[str]]


@dataclass(frozen=True)
class DenseShape:
    """Sizes of one dense model.

    Attributes:
        arch: "llama" or "qwen2" (q, k and v biases).
        n_embd: hidden size.
        n_layer: blocks.
        n_head, n_head_kv: query and key/value heads (head size n_embd / n_head).
        n_ff: feed-forward size.
        n_ctx: trained context length.
        rope_base: rope frequency base.
        tied_output: no output.weight: the output head is token_embd.
        logit_scale: spread of the output logits.
    """

    arch: str = "llama"
    n_embd: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_head_kv: int = 2
    n_ff: int = 128
    n_ctx: int = 4096
    rope_base: float = 500_000.0
    tied_output: bool = False
    logit_scale: float = 8.0

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


def write_tiny_dense(
    path: Path,
    *,
    seed: int = 1,
    shape: DenseShape = DenseShape(),
    name: str = "tiny-dense",
    vocab: Vocabulary | None = None,
    maker: Callable[[int], WeightMaker] = WeightMaker,
) -> Path:
    """Write a dense model of `shape` and return `path`; `vocab` and `maker` are
    write_tiny_qwen35's (a real model's vocabulary size, deferred large matrices)."""
    import gguf  # imported here: only tests and the tools need the writer

    if shape.arch not in ("llama", "qwen2"):
        raise ValueError(f"no dense layout for {shape.arch!r}")
    tokens, types, merges = vocab if vocab is not None else vocabulary()
    make = maker(seed)
    tensors = _tensors(make, shape, len(tokens))

    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), shape.arch)
    writer.add_name(name)
    writer.add_context_length(shape.n_ctx)
    writer.add_embedding_length(shape.n_embd)
    writer.add_block_count(shape.n_layer)
    writer.add_feed_forward_length(shape.n_ff)
    writer.add_head_count(shape.n_head)
    writer.add_head_count_kv(shape.n_head_kv)
    writer.add_rope_dimension_count(shape.head_dim)
    writer.add_rope_freq_base(shape.rope_base)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    finish_gguf(
        writer, (tokens, types, merges), eos_id=2, chat_template=CHATML_TEMPLATE, tensors=tensors
    )
    return path


def _tensors(make: WeightMaker, shape: DenseShape, n_vocab: int) -> dict[str, np.ndarray]:
    e, f, d = shape.n_embd, shape.n_ff, shape.head_dim
    kv = shape.n_head_kv * d
    tensors: dict[str, np.ndarray] = {}
    if shape.tied_output:
        tensors["token_embd.weight"] = make.output_head(n_vocab, e, shape.logit_scale)
    else:
        tensors["token_embd.weight"] = make.embedding(n_vocab, e)
        tensors["output.weight"] = make.output_head(n_vocab, e, shape.logit_scale)
    tensors["output_norm.weight"] = make.ones(e)
    for block in range(shape.n_layer):
        p = f"blk.{block}."
        tensors[p + "attn_norm.weight"] = make.ones(e)
        tensors[p + "attn_q.weight"] = make.mat(e, e)
        tensors[p + "attn_k.weight"] = make.mat(kv, e)
        tensors[p + "attn_v.weight"] = make.mat(kv, e)
        tensors[p + "attn_output.weight"] = make.mat(e, e)
        if shape.arch == "qwen2":
            tensors[p + "attn_q.bias"] = make.vec(e, 0.1)
            tensors[p + "attn_k.bias"] = make.vec(kv, 0.1)
            tensors[p + "attn_v.bias"] = make.vec(kv, 0.1)
        tensors[p + "ffn_norm.weight"] = make.ones(e)
        tensors[p + "ffn_gate.weight"] = make.mat(f, e)
        tensors[p + "ffn_up.weight"] = make.mat(f, e)
        tensors[p + "ffn_down.weight"] = make.mat(e, f)
    return tensors
