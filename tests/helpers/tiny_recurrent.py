"""A tiny Mamba (recurrent, state-space) GGUF that llama.cpp really loads, for rollback tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from specchat.tinymodels import CHATML_TEMPLATE, finish_gguf, vocabulary


def write_tiny_mamba(path: Path, *, seed: int = 1, n_embd: int = 32, n_layer: int = 2) -> Path:
    """Write a 2-layer Mamba model over the tiny models' vocabulary and return its path.

    Shapes follow llama.cpp's LLM_ARCH_MAMBA loader (llama-model.cpp): d_inner = 2 * n_embd,
    ssm_a and ssm_d without a ".weight" suffix.
    """
    import gguf

    tokens, types, merges = vocabulary()
    n_vocab = len(tokens)
    d_inner, d_state, d_conv, dt_rank = 2 * n_embd, 8, 4, 4
    rng = np.random.default_rng(seed)

    def mat(rows: int, cols: int, scale: float = 1.0) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * scale / np.sqrt(cols)).astype(np.float32)

    tensors: dict[str, np.ndarray] = {
        "token_embd.weight": mat(n_vocab, n_embd, np.sqrt(n_embd)),
        "output_norm.weight": np.ones(n_embd, dtype=np.float32),
        "output.weight": mat(n_vocab, n_embd, 8.0),
    }
    tensors["output.weight"][:3] *= np.float32(0.2)  # quieter special tokens, as tinymodels
    for block in range(n_layer):
        p = f"blk.{block}."
        tensors[p + "attn_norm.weight"] = np.ones(n_embd, dtype=np.float32)
        tensors[p + "ssm_in.weight"] = mat(2 * d_inner, n_embd)
        tensors[p + "ssm_conv1d.weight"] = mat(d_inner, d_conv)
        tensors[p + "ssm_conv1d.bias"] = np.zeros(d_inner, dtype=np.float32)
        tensors[p + "ssm_x.weight"] = mat(dt_rank + 2 * d_state, d_inner)
        tensors[p + "ssm_dt.weight"] = mat(d_inner, dt_rank)
        tensors[p + "ssm_dt.bias"] = np.full(d_inner, -2.0, dtype=np.float32)
        # A = -exp(A_log) with A_log = log(1..d_state), as Mamba initialises it.
        a = -np.tile(np.arange(1, d_state + 1, dtype=np.float32), (d_inner, 1))
        tensors[p + "ssm_a"] = a
        tensors[p + "ssm_d"] = np.ones(d_inner, dtype=np.float32)
        tensors[p + "ssm_out.weight"] = mat(n_embd, d_inner)

    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), "mamba")
    writer.add_name("tiny-mamba")
    writer.add_context_length(2048)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(0)
    writer.add_head_count(0)
    writer.add_ssm_conv_kernel(d_conv)
    writer.add_ssm_inner_size(d_inner)
    writer.add_ssm_state_size(d_state)
    writer.add_ssm_time_step_rank(dt_rank)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    finish_gguf(
        writer, (tokens, types, merges), eos_id=2, chat_template=CHATML_TEMPLATE, tensors=tensors
    )
    return path
