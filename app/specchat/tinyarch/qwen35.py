"""Tiny Qwen3.5 / 3.6 hybrids (architecture `qwen35`): Gated-DeltaNet recurrent layers with
full attention every `full_attention_interval`-th layer, and an optional MTP head.

Shapes and keys follow llama.cpp's `llama_model_qwen35` (src/models/qwen35.cpp:
load_arch_hparams, load_arch_tensors, graph, graph_mtp) and what convert_hf_to_gguf
(conversion/qwen.py: Qwen3NextModel, _QwenMtpMixin, _Qwen35MRopeMixin) writes:

- `block_count` counts the MTP block: a model with 4 trunk layers and an MTP head says
  block_count 5 and nextn_predict_layers 1, and the MTP block is `blk.4`.
- `attention.recurrent_layers` marks each block (the MTP block is not recurrent);
  `full_attention_interval` is written too, as the converter does.
- A full-attention layer's attn_q projects to query and gate (2 * n_head * head_dim); its
  rope is interleaved M-RoPE (`rope.dimension_sections` is required) over a quarter of the
  head (`rope.dimension_count` = head_dim / 4).
- A recurrent layer holds attn_qkv (q, k, v for the convolution), attn_gate (z), ssm_conv1d,
  ssm_dt.bias, ssm_a (= -exp(A_log), no ".weight"), ssm_alpha, ssm_beta, ssm_norm, ssm_out.
  llama.cpp takes the value head size from ssm.state_size, so inner_size must be
  state_size * time_step_rank (value heads).
- Norm weights are stored as trained (the converter adds Qwen's +1): ones here.

At run time (llama_model_params.load_mtp = true) llama_model_n_layer() counts the trunk
only and llama_model_n_layer_nextn() the MTP block; an MTP context (ctx_type
LLAMA_CONTEXT_TYPE_MTP) caches the MTP block's own keys and values, so llama.cpp does not
keep its ctx_other (llama_get_ctx_other is null): the driver catches it up on the
target's tokens, each paired with the target's hidden state before it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specchat.tinyarch.real_vocab import RealChat, RealTokenizer
from specchat.tinyarch.weights import WeightMaker, perturbed
from specchat.tinymodels import CHATML_TEMPLATE, finish_gguf, vocabulary

#: Tokens, token types and merges, as tinymodels.vocabulary() returns them.
Vocabulary = tuple[list[str], list[int], list[str]]


@dataclass(frozen=True)
class Qwen35Shape:
    """Sizes of one tiny qwen35 model (the trunk; an MTP block adds one more block).

    Attributes:
        n_embd: hidden size.
        n_layer: trunk layers; every `full_attention_interval`-th one is full attention.
        full_attention_interval: 4 in every released Qwen3.5 / 3.6.
        n_head, n_head_kv, head_dim: full-attention layers.
        n_ff: feed-forward size.
        conv_kernel, key_heads, value_heads, head_state: the Gated-DeltaNet layers
            (linear_conv_kernel_dim, linear_num_key_heads, linear_num_value_heads,
            linear_key_head_dim = linear_value_head_dim).
        n_ctx: trained context length.
        logit_scale: spread of the output logits.
        tied_output: no output.weight; the output head is token_embd (tie_word_embeddings,
            as in Qwen3.5-0.8B, 2B and 4B).
        mrope: the M-RoPE sections; None puts rope_dims / 2 pairs in the proportions of
            the released models' [11, 11, 10, 0].
    """

    n_embd: int = 64
    n_layer: int = 4
    full_attention_interval: int = 4
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 32
    n_ff: int = 128
    conv_kernel: int = 4
    key_heads: int = 2
    value_heads: int = 4
    head_state: int = 16
    n_ctx: int = 4096
    logit_scale: float = 8.0
    tied_output: bool = False
    mrope: tuple[int, int, int, int] | None = None

    @property
    def rope_dims(self) -> int:
        """Rotated dimensions: a quarter of the head (partial_rotary_factor 0.25)."""
        return self.head_dim // 4

    @property
    def rope_sections(self) -> list[int]:
        """M-RoPE sections over rope_dims / 2 pairs, in the proportions of the released
        models' [11, 11, 10, 0] unless `mrope` names them."""
        if self.mrope is not None:
            return list(self.mrope)
        pairs = self.rope_dims // 2
        first = pairs - 2 * (pairs // 3)
        return [first, pairs // 3, pairs // 3, 0]

    def is_recurrent(self, layer: int) -> bool:
        return layer < self.n_layer and (layer + 1) % self.full_attention_interval != 0


def write_tiny_qwen35(
    path: Path,
    *,
    seed: int = 1,
    perturb: float = 0.0,
    perturb_seed: int = 0,
    mtp: bool = True,
    shape: Qwen35Shape = Qwen35Shape(),
    name: str = "tiny-qwen35",
    vocab: Vocabulary | None = None,
    chat: RealChat | None = None,
    maker: Callable[[int], WeightMaker] = WeightMaker,
) -> Path:
    """Write a tiny qwen35 hybrid over the tiny vocabulary and return `path`.

    `mtp` appends the MTP (nextn) block; without it the file is a plain hybrid, the role
    Qwen3.5-0.8B plays as a draft model for the larger ones. `perturb` adds relative noise
    to the matrices of the `seed` model (0 = an exact copy), so a perturbed copy drafts the
    original with high but imperfect agreement. The trunk weights do not depend on `mtp`.

    `vocab` replaces the tiny vocabulary (tinymodels.padded_vocabulary gives a real model's
    size) and `maker` makes the weight source from a seed (weights.LayoutMaker defers the
    large matrices): with both, the same layout is written at a real model's size.
    `chat` replaces the vocabulary and ChatML with a real family's tokenizer and template
    (real_vocab.QWEN35_CHAT).
    """
    import gguf  # imported here: only tests and the self-test need the writer

    tokens: Vocabulary | RealTokenizer = vocab if vocab is not None else vocabulary()
    eos_id, template = 2, CHATML_TEMPLATE
    if chat is not None:
        tokens, eos_id, template = chat.tokenizer, chat.eos_id, chat.template
    n_vocab = len(tokens[0]) if isinstance(tokens, tuple) else tokens.n_vocab
    make = maker(seed)
    tensors = _trunk_tensors(make, shape, n_vocab)
    if mtp:
        tensors.update(_mtp_tensors(maker(seed + 50_000), shape, block=shape.n_layer))
    tensors = perturbed(tensors, perturb, perturb_seed)

    n_blocks = shape.n_layer + (1 if mtp else 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), "qwen35")
    writer.add_name(name)
    writer.add_context_length(shape.n_ctx)
    writer.add_embedding_length(shape.n_embd)
    writer.add_block_count(n_blocks)
    writer.add_feed_forward_length(shape.n_ff)
    writer.add_head_count(shape.n_head)
    writer.add_head_count_kv(shape.n_head_kv)
    writer.add_key_length(shape.head_dim)
    writer.add_value_length(shape.head_dim)
    writer.add_rope_freq_base(10_000_000.0)
    writer.add_rope_dimension_count(shape.rope_dims)
    writer.add_rope_dimension_sections(shape.rope_sections)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_ssm_conv_kernel(shape.conv_kernel)
    writer.add_ssm_state_size(shape.head_state)
    writer.add_ssm_group_count(shape.key_heads)
    writer.add_ssm_time_step_rank(shape.value_heads)
    writer.add_ssm_inner_size(shape.head_state * shape.value_heads)
    # Spelled out: the gguf package in the environment may predate add_recurrent_layers.
    writer.add_array(
        "qwen35.attention.recurrent_layers",
        [shape.is_recurrent(layer) for layer in range(n_blocks)],
    )
    writer.add_full_attention_interval(shape.full_attention_interval)
    if mtp:
        writer.add_nextn_predict_layers(1)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    finish_gguf(writer, tokens, eos_id=eos_id, chat_template=template, tensors=tensors)
    return path


def _trunk_tensors(make: WeightMaker, shape: Qwen35Shape, n_vocab: int) -> dict[str, np.ndarray]:
    e = shape.n_embd
    tensors: dict[str, np.ndarray] = {
        "token_embd.weight": make.embedding(n_vocab, e),
        "output_norm.weight": make.ones(e),
    }
    if not shape.tied_output:
        tensors["output.weight"] = make.output_head(n_vocab, e, shape.logit_scale)
    for layer in range(shape.n_layer):
        p = f"blk.{layer}."
        tensors[p + "attn_norm.weight"] = make.ones(e)
        tensors[p + "post_attention_norm.weight"] = make.ones(e)
        if shape.is_recurrent(layer):
            tensors.update(_delta_net_tensors(make, shape, p))
        else:
            tensors.update(_attention_tensors(make, shape, p))
        tensors.update(_ffn_tensors(make, shape, p))
    return tensors


def _delta_net_tensors(make: WeightMaker, shape: Qwen35Shape, p: str) -> dict[str, np.ndarray]:
    e, v_heads = shape.n_embd, shape.value_heads
    key_dim = shape.head_state * shape.key_heads
    value_dim = shape.head_state * v_heads
    conv_dim = 2 * key_dim + value_dim
    return {
        p + "attn_qkv.weight": make.mat(conv_dim, e),
        p + "attn_gate.weight": make.mat(value_dim, e),
        p + "ssm_conv1d.weight": make.mat(conv_dim, shape.conv_kernel),
        p + "ssm_dt.bias": make.vec(v_heads, 0.5, 1.0),
        # A = -exp(A_log) with A_log spread around 0: decays of a few steps to a few dozen.
        p + "ssm_a": -np.exp(make.uniform(v_heads, -1.5, 1.0)),
        p + "ssm_alpha.weight": make.mat(v_heads, e),
        p + "ssm_beta.weight": make.mat(v_heads, e),
        p + "ssm_norm.weight": make.ones(shape.head_state),
        p + "ssm_out.weight": make.mat(e, value_dim),
    }


def _attention_tensors(make: WeightMaker, shape: Qwen35Shape, p: str) -> dict[str, np.ndarray]:
    e, d = shape.n_embd, shape.head_dim
    return {
        # query and its output gate, interleaved per head
        p + "attn_q.weight": make.mat(2 * shape.n_head * d, e),
        p + "attn_k.weight": make.mat(shape.n_head_kv * d, e),
        p + "attn_v.weight": make.mat(shape.n_head_kv * d, e),
        p + "attn_output.weight": make.mat(e, shape.n_head * d),
        p + "attn_q_norm.weight": make.ones(d),
        p + "attn_k_norm.weight": make.ones(d),
    }


def _ffn_tensors(make: WeightMaker, shape: Qwen35Shape, p: str) -> dict[str, np.ndarray]:
    e, f = shape.n_embd, shape.n_ff
    return {
        p + "ffn_gate.weight": make.mat(f, e),
        p + "ffn_up.weight": make.mat(f, e),
        p + "ffn_down.weight": make.mat(e, f),
    }


def _mtp_tensors(make: WeightMaker, shape: Qwen35Shape, block: int) -> dict[str, np.ndarray]:
    """The MTP block: a full-attention decoder block behind nextn.eh_proj, which mixes the
    normalised token embedding (enorm) with the target's last hidden state (hnorm). It
    reuses token_embd and output (no nextn.embed_tokens / shared_head_head), as the
    released checkpoints do."""
    e = shape.n_embd
    p = f"blk.{block}."
    tensors = {
        p + "attn_norm.weight": make.ones(e),
        p + "post_attention_norm.weight": make.ones(e),
        **_attention_tensors(make, shape, p),
        **_ffn_tensors(make, shape, p),
        p + "nextn.eh_proj.weight": make.mat(e, 2 * e),
        p + "nextn.enorm.weight": make.ones(e),
        p + "nextn.hnorm.weight": make.ones(e),
        p + "nextn.shared_head_norm.weight": make.ones(e),
    }
    return tensors


#: The publishers' Qwen3.5 shapes (Qwen/Qwen3.5-0.8B and -4B config.json): what
#: tools/write_proportional_models.py writes real-shape synthetic models of, and what memory
#: estimates are checked on.
QWEN35_0_8B = Qwen35Shape(
    n_embd=1024,
    n_layer=24,
    full_attention_interval=4,
    n_head=8,
    n_head_kv=2,
    head_dim=256,
    n_ff=3584,
    conv_kernel=4,
    key_heads=16,
    value_heads=16,
    head_state=128,
    n_ctx=262_144,
    tied_output=True,
    mrope=(11, 11, 10, 0),
)

QWEN35_4B = Qwen35Shape(
    n_embd=2560,
    n_layer=32,
    full_attention_interval=4,
    n_head=16,
    n_head_kv=4,
    head_dim=256,
    n_ff=9216,
    conv_kernel=4,
    key_heads=16,
    value_heads=32,
    head_state=128,
    n_ctx=262_144,
    tied_output=True,
    mrope=(11, 11, 10, 0),
)
