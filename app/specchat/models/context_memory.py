"""What a model's context costs in memory, read from its GGUF metadata without loading it:
the attention layers' KV cache by context token, and one copy of a recurrent or hybrid
model's state (llama.cpp keeps several: engine/llamacpp/recurrent_state.state_copies)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

#: Bytes per stored key or value: F16, and Q8_0 (34-byte blocks of 32).
CACHE_BYTES = {"F16": 2.0, "Q8_0": 34 / 32}
#: A recurrent state's values are F32 (llama.cpp's type_r and type_s).
STATE_VALUE_BYTES = 4
#: The metadata keys it reads, after the architecture's name.
MEMORY_KEYS = (
    "block_count",
    "embedding_length",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.key_length",
    "attention.value_length",
    "full_attention_interval",
    "ssm.conv_kernel",
    "ssm.inner_size",
    "ssm.state_size",
    "ssm.group_count",
    "shortconv.l_cache",
    "nextn_predict_layers",
)


@dataclass(frozen=True)
class ContextMemory:
    """A model's context's memory by its parts.

    Attributes:
        kv_bytes_per_token: keys and values of every attention layer, per context token.
        state_bytes: one copy of the recurrent layers' state (0 for an attention model):
            their convolution and SSM states, llama.cpp's n_embd_r and n_embd_s.
        attention_layers: layers with a KV cache.
        recurrent_layers: layers with a recurrent state.
    """

    kv_bytes_per_token: int
    state_bytes: int
    attention_layers: int
    recurrent_layers: int

    def total(self, n_ctx: int, *, state_copies: int) -> int:
        """Bytes of a context of `n_ctx` tokens holding `state_copies` recurrent states."""
        return n_ctx * self.kv_bytes_per_token + state_copies * self.state_bytes


def context_memory(values: Mapping[str, Any], *, key_type: str = "F16") -> ContextMemory:
    """The memory parts of the model whose GGUF metadata is `values` (gguf_reader's
    GGUFMetadata.values), as llama.cpp sizes them (src/llama-hparams.cpp n_embd_r, n_embd_s;
    a layer is recurrent where its head_count_kv is 0, or off full_attention_interval)."""
    arch = str(values.get("general.architecture", ""))

    def number(key: str, default: int = 0) -> int:  # a scalar key of this architecture
        value = values.get(f"{arch}.{key}", default)
        return int(value) if not isinstance(value, (list, tuple)) else default

    n_layer = number("block_count")
    n_embd = number("embedding_length")
    n_head = _first(values.get(f"{arch}.attention.head_count", 0))
    kv = values.get(f"{arch}.attention.head_count_kv", n_head)
    per_layer = list(kv) if isinstance(kv, (list, tuple)) else None
    interval = number("full_attention_interval")
    if per_layer is not None:
        recurrent = sum(1 for n in per_layer[:n_layer] if int(n) == 0)
    elif interval > 0:
        # The MTP blocks after the trunk (nextn_predict_layers) are attention layers.
        trunk = n_layer - number("nextn_predict_layers")
        recurrent = trunk - trunk // interval
    elif number("ssm.conv_kernel") or number("shortconv.l_cache"):
        recurrent = n_layer
    else:
        recurrent = 0
    attention = n_layer - recurrent
    n_head_kv = max((int(n) for n in per_layer), default=0) if per_layer else _first(kv)
    head = n_embd // n_head if n_head else 0
    key_length = number("attention.key_length", head)
    value_length = number("attention.value_length", head)
    per_token = (
        attention
        * n_head_kv
        * (key_length * CACHE_BYTES[key_type] + value_length * CACHE_BYTES["F16"])
    )
    return ContextMemory(
        kv_bytes_per_token=int(per_token),
        state_bytes=recurrent * _state_values(number, n_embd) * STATE_VALUE_BYTES,
        attention_layers=attention,
        recurrent_layers=recurrent,
    )


def _state_values(number: Callable[[str], int], n_embd: int) -> int:
    """Values of one recurrent layer's state: llama.cpp's n_embd_r() + n_embd_s()."""
    l_cache = number("shortconv.l_cache")
    if l_cache:
        return n_embd * (l_cache - 1)  # LFM2's short convolution
    d_conv, d_inner = number("ssm.conv_kernel"), number("ssm.inner_size")
    d_state, n_group = number("ssm.state_size"), number("ssm.group_count")
    conv = max(d_conv - 1, 0) * (d_inner + 2 * n_group * d_state)
    return conv + d_state * d_inner


def _first(value: Any) -> int:
    if isinstance(value, (list, tuple)):
        return int(max(value, default=0))
    return int(value or 0)
