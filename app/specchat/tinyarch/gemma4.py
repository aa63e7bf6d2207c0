"""Tiny Gemma 4 targets (architecture `gemma4`) and their MTP drafters (`gemma4-assistant`).

The target follows llama.cpp's `llama_model_gemma4` (src/models/gemma4.cpp) and what
convert_hf_to_gguf writes for it (conversion/gemma.py: Gemma4Model):

- Sliding-window and full-attention layers differ in head size: `attention.key_length` /
  `value_length` (and `rope.dimension_count`) are the full layers', the `*_swa` keys the
  sliding ones'; `attention.sliding_window_pattern` (one bool per layer, true = sliding)
  and `attention.sliding_window` are required, and so is
  `embedding_length_per_layer_input` (0: no per-layer embeddings, as in 31B / 26B-A4B).
- One `rope_freqs.weight` (head_dim_full / 2 factors: 1 for the rotated quarter, 1e30 for
  the rest, "proportional" rope) serves every full-attention layer.
- Q and K are RMS-normed (attn_q_norm, attn_k_norm), V is normed without a weight, and the
  attention scale is 1; the FFN is GELU with post-norms (post_attention_norm,
  post_ffw_norm) and a per-layer `layer_output_scale`.
- The output head is tied to token_embd (no output.weight); logits are soft-capped.
- E2B / E4B have per-layer embeddings: `per_layer_token_embd` (a lookup of
  n_embd_per_layer values per layer and token), `per_layer_model_proj` and
  `per_layer_proj_norm`, and per block `inp_gate`, `proj` and `post_norm`. Their last
  `attention.shared_kv_layers` blocks have no K/V of their own (they read the last earlier
  block of their kind) and, with use_double_wide_mlp, twice the FFN: `feed_forward_length`
  is then one value per block.

The assistant follows `llama_model_gemma4_assistant` (src/models/gemma4-assistant.cpp) and
Gemma4AssistantModel in the converter:

- Every block is a nextn block: `nextn_predict_layers` = `block_count`, so
  llama_model_n_layer() is 0.
- `embedding_length_out` carries the target's hidden size and must differ from the
  assistant's own `embedding_length` (llama.cpp refuses them equal).
- It has no K/V projections: each layer reads the target's cache (a sliding layer the
  target's last sliding layer, a full one its last full layer), so the target's last two
  layers must be sliding then full, and head sizes and KV heads must match the target's.
  A context for it needs `ctx_other` = the target's context.
- Its input is the target's token embedding (scaled by sqrt(target n_embd)) concatenated
  with the target's last hidden state, through `nextn.pre_projection`; its own
  token_embd is the (tied) output head, and `nextn.post_projection` maps its last hidden
  state back to the target's width for the next step.
- It carries the target's tokenizer. The released assistants' centroid-masked head
  (masked_embedding.*) is dropped by the converter; llama.cpp would accept
  masked_embd_centroids / masked_embd_ordering but does not use them, so none is written.

Both use the tiny byte-level vocabulary with ChatML (tinymodels.vocabulary), not Gemma's
SentencePiece tokenizer: the tensor layout and keys are what these files reproduce.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from specchat.tinyarch.qwen35 import Vocabulary
from specchat.tinyarch.real_vocab import RealChat, RealTokenizer
from specchat.tinyarch.weights import WeightMaker, perturbed
from specchat.tinymodels import CHATML_TEMPLATE, finish_gguf, vocabulary

if TYPE_CHECKING:
    import gguf


@dataclass(frozen=True)
class Gemma4Shape:
    """Sizes of a tiny Gemma 4 model (target or assistant).

    Attributes:
        n_embd: hidden size.
        sliding: one flag per layer, True for a sliding-window layer. The released
            targets interleave five sliding layers with one full one and end on a full one.
        n_head, n_head_kv: attention heads (the same in every layer here).
        head_dim_swa, head_dim_full: head sizes of sliding and full layers.
        sliding_window: the window of sliding layers.
        n_ff: feed-forward size.
        n_ctx: trained context length.
        softcap: final_logit_softcapping.
        n_embd_per_layer: per-layer embedding width (0: none).
        shared_kv_layers: the last blocks that read an earlier block's K/V.
        wide_shared_ffn: those blocks have an FFN of 2 * n_ff (use_double_wide_mlp).
    """

    n_embd: int = 64
    sliding: tuple[bool, ...] = (True, True, True, False, True, False)
    n_head: int = 4
    n_head_kv: int = 2
    head_dim_swa: int = 32
    head_dim_full: int = 64
    sliding_window: int = 128
    n_ff: int = 128
    n_ctx: int = 4096
    softcap: float = 30.0
    n_embd_per_layer: int = 0
    shared_kv_layers: int = 0
    wide_shared_ffn: bool = False

    @property
    def n_layer(self) -> int:
        return len(self.sliding)

    def has_kv(self, layer: int) -> bool:
        return layer < self.n_layer - self.shared_kv_layers

    def n_ff_of(self, layer: int) -> int:
        return 2 * self.n_ff if self.wide_shared_ffn and not self.has_kv(layer) else self.n_ff

    def head_dim(self, layer: int) -> int:
        return self.head_dim_swa if self.sliding[layer] else self.head_dim_full


#: What the final norm multiplies by: the spread of the (tied) output logits.
LOGIT_SCALE = 8.0

#: Weight of the post-attention and post-FFN norms: the layers' outputs outweigh the token's
#: own embedding in the residual stream, else the tied head keeps repeating its input.
POST_NORM = 2.0

#: Q and K norm weight (see _qk_norm).
QK_NORM = 0.75

#: The assistant of the default target: narrower, three sliding layers and a full one.
ASSISTANT_SHAPE = Gemma4Shape(n_embd=32, sliding=(True, True, True, False), n_ff=64)


def write_tiny_gemma4(
    path: Path,
    *,
    seed: int = 1,
    perturb: float = 0.0,
    perturb_seed: int = 0,
    shape: Gemma4Shape = Gemma4Shape(),
    name: str = "tiny-gemma4",
    vocab: Vocabulary | None = None,
    chat: RealChat | None = None,
    maker: Callable[[int], WeightMaker] = WeightMaker,
) -> Path:
    """Write a tiny gemma4 target over the tiny vocabulary and return `path`; `perturb`
    adds relative noise to the matrices of the `seed` model, as for write_tiny_qwen35, and
    `vocab`, `chat` (real_vocab.GEMMA4_CHAT) and `maker` are write_tiny_qwen35's too."""
    tokens, eos_id, template = _tokens(vocab, chat)
    n_vocab = len(tokens[0]) if isinstance(tokens, tuple) else tokens.n_vocab
    make = maker(seed)
    e = shape.n_embd
    tensors: dict[str, np.ndarray] = {
        **_tied_head(make, n_vocab, e),
        "rope_freqs.weight": _proportional_rope_factors(shape.head_dim_full),
    }
    for layer in range(shape.n_layer):
        p = f"blk.{layer}."
        tensors.update(_block_tensors(make, shape, layer, p, with_kv=shape.has_kv(layer)))
    if shape.n_embd_per_layer:
        tensors.update(_per_layer_embedding(make, shape, n_vocab))
    tensors = perturbed(tensors, perturb, perturb_seed)

    writer = _start_writer(path, "gemma4", shape, name)
    writer.add_shared_kv_layers(shape.shared_kv_layers)
    writer.add_embedding_length_per_layer_input(shape.n_embd_per_layer)
    writer.add_final_logit_softcapping(shape.softcap)
    finish_gguf(writer, tokens, eos_id=eos_id, chat_template=template, tensors=tensors)
    return path


def write_tiny_gemma4_assistant(
    path: Path,
    *,
    seed: int = 11,
    target: Gemma4Shape = Gemma4Shape(),
    shape: Gemma4Shape = ASSISTANT_SHAPE,
    name: str = "tiny-gemma4-assistant",
    vocab: Vocabulary | None = None,
    chat: RealChat | None = None,
    maker: Callable[[int], WeightMaker] = WeightMaker,
) -> Path:
    """Write the gemma4-assistant drafter of a tiny gemma4 target of shape `target` and
    return `path`. Head sizes, KV heads and the sliding window come from `target` (the
    assistant reads its cache); `shape` gives the assistant's own width, layers and FFN;
    `vocab` and `chat` (the target's) and `maker` are write_tiny_qwen35's."""
    if not target.sliding[-2] or target.sliding[-1]:
        raise ValueError("the target's last two layers must be sliding, then full")
    shape = Gemma4Shape(
        n_embd=shape.n_embd,
        sliding=shape.sliding,
        n_head=shape.n_head,
        n_head_kv=target.n_head_kv,
        head_dim_swa=target.head_dim_swa,
        head_dim_full=target.head_dim_full,
        sliding_window=target.sliding_window,
        n_ff=shape.n_ff,
        n_ctx=target.n_ctx,
        softcap=target.softcap,
    )
    if shape.n_embd == target.n_embd:
        raise ValueError("llama.cpp needs the assistant narrower or wider than its target")
    tokens, eos_id, template = _tokens(vocab, chat)
    n_vocab = len(tokens[0]) if isinstance(tokens, tuple) else tokens.n_vocab
    make = maker(seed)
    e, backbone = shape.n_embd, target.n_embd
    tensors: dict[str, np.ndarray] = {
        **_tied_head(make, n_vocab, e),
        "rope_freqs.weight": _proportional_rope_factors(shape.head_dim_full),
        # [target token embedding ; target hidden state] -> assistant width
        "nextn.pre_projection.weight": make.mat(e, 2 * backbone),
        # assistant's last hidden state -> target width (the next step's hidden input)
        "nextn.post_projection.weight": make.mat(backbone, e),
    }
    for layer in range(shape.n_layer):
        p = f"blk.{layer}."
        tensors.update(_block_tensors(make, shape, layer, p, with_kv=False))

    writer = _start_writer(path, "gemma4-assistant", shape, name)
    writer.add_shared_kv_layers(0)
    writer.add_embedding_length_per_layer_input(0)
    writer.add_embedding_length_out(backbone)
    writer.add_nextn_predict_layers(shape.n_layer)
    finish_gguf(writer, tokens, eos_id=eos_id, chat_template=template, tensors=tensors)
    return path


def _tokens(
    vocab: Vocabulary | None, chat: RealChat | None
) -> tuple[Vocabulary | RealTokenizer, int, str]:
    """The tokenizer, end-of-turn id and template a tiny Gemma 4 file carries."""
    if chat is not None:
        return chat.tokenizer, chat.eos_id, chat.template
    return (vocab if vocab is not None else vocabulary()), 2, CHATML_TEMPLATE


def _start_writer(path: Path, arch: str, shape: Gemma4Shape, name: str) -> gguf.GGUFWriter:
    """A writer holding the hyperparameters both Gemma 4 architectures share."""
    import gguf  # imported here: only tests and the self-test need the writer

    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(name)
    writer.add_context_length(shape.n_ctx)
    writer.add_embedding_length(shape.n_embd)
    writer.add_block_count(shape.n_layer)
    lengths = [shape.n_ff_of(layer) for layer in range(shape.n_layer)]
    writer.add_feed_forward_length(lengths if len(set(lengths)) > 1 else shape.n_ff)
    writer.add_head_count(shape.n_head)
    writer.add_head_count_kv(shape.n_head_kv)
    writer.add_key_length(shape.head_dim_full)
    writer.add_value_length(shape.head_dim_full)
    writer.add_key_length_swa(shape.head_dim_swa)
    writer.add_value_length_swa(shape.head_dim_swa)
    writer.add_rope_dimension_count(shape.head_dim_full)
    writer.add_rope_dimension_count_swa(shape.head_dim_swa)
    writer.add_rope_freq_base(1_000_000.0)
    writer.add_rope_freq_base_swa(10_000.0)
    writer.add_sliding_window(shape.sliding_window)
    writer.add_sliding_window_pattern(list(shape.sliding))
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    return writer


def _tied_head(make: WeightMaker, n_vocab: int, n_embd: int) -> dict[str, np.ndarray]:
    """token_embd doubling as the output head. Gemma multiplies the input embedding by
    sqrt(n_embd): small entries make that unit-sized, so the layers are not drowned by the
    token itself (which would make the tied head repeat its input), and a large final norm
    gives the logits their spread back."""
    return {
        "token_embd.weight": make.output_head(n_vocab, n_embd, 1.0),
        "output_norm.weight": np.full(n_embd, LOGIT_SCALE, dtype=np.float32),
    }


def _qk_norm(head_dim: int) -> np.ndarray:
    """Q and K norm weights. Gemma 4 attends with scale 1: unit weights make the attention
    so sharp that a copy perturbed by 1% picks other tokens half the time, while weights
    of head_dim ** -0.25 (the usual 1 / sqrt(head_dim) scores) make it so flat that the
    tied head falls into repeating a token. QK_NORM sits between."""
    return np.full(head_dim, QK_NORM, dtype=np.float32)


def _proportional_rope_factors(head_dim_full: int) -> np.ndarray:
    """Full layers rotate a quarter of the head; 1e30 turns the other pairs' rotation off
    (the converter's generate_extra_tensors)."""
    pairs = head_dim_full // 2
    rotated = head_dim_full // 8
    return np.array([1.0] * rotated + [1e30] * (pairs - rotated), dtype=np.float32)


def _block_tensors(
    make: WeightMaker, shape: Gemma4Shape, layer: int, p: str, *, with_kv: bool
) -> dict[str, np.ndarray]:
    e, f, d = shape.n_embd, shape.n_ff_of(layer), shape.head_dim(layer)
    tensors = {
        p + "attn_norm.weight": make.ones(e),
        p + "attn_q.weight": make.mat(shape.n_head * d, e),
        p + "attn_q_norm.weight": _qk_norm(d),
        p + "attn_output.weight": make.mat(e, shape.n_head * d),
        p + "post_attention_norm.weight": np.full(e, POST_NORM, dtype=np.float32),
        p + "ffn_norm.weight": make.ones(e),
        p + "ffn_gate.weight": make.mat(f, e),
        p + "ffn_up.weight": make.mat(f, e),
        p + "ffn_down.weight": make.mat(e, f),
        p + "post_ffw_norm.weight": np.full(e, POST_NORM, dtype=np.float32),
        p + "layer_output_scale.weight": np.ones(1, dtype=np.float32),
    }
    if with_kv:
        tensors[p + "attn_k.weight"] = make.mat(shape.n_head_kv * d, e)
        tensors[p + "attn_v.weight"] = make.mat(shape.n_head_kv * d, e)
        tensors[p + "attn_k_norm.weight"] = _qk_norm(d)
    if shape.n_embd_per_layer:
        tensors[p + "inp_gate.weight"] = make.mat(shape.n_embd_per_layer, e)
        tensors[p + "proj.weight"] = make.mat(e, shape.n_embd_per_layer)
        tensors[p + "post_norm.weight"] = make.ones(e)
    return tensors


def _per_layer_embedding(
    make: WeightMaker, shape: Gemma4Shape, n_vocab: int
) -> dict[str, np.ndarray]:
    """The per-layer embedding table (every layer's slice of it, per token) and the
    projection of the token embedding that is added to it."""
    width = shape.n_embd_per_layer * shape.n_layer
    return {
        "per_layer_token_embd.weight": make.embedding(n_vocab, width),
        "per_layer_model_proj.weight": make.mat(width, shape.n_embd),
        "per_layer_proj_norm.weight": make.ones(shape.n_embd_per_layer),
    }
