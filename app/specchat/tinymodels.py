"""Builds tiny GGUF models (a few MB) that llama.cpp really loads, for tests and the self-test."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import gguf

    from specchat.tinyarch.real_vocab import RealTokenizer

#: Chat template of the tiny models: ChatML, like the Qwen models of the default pair.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
#: Gemma's special tokens; its turn markers are user-defined tokens (type 4), as in Gemma 3.
GEMMA_SPECIAL_TOKENS = ("<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>")

#: A few merges: llama.cpp refuses a gpt2-style vocabulary whose merges list is empty.
MERGES = ["Ġ t", "h e", "i n", "Ġt he", "e r", "o n", "Ġ a", "r e", "a t", "e n"]


def _bytes_to_unicode() -> list[str]:
    """GPT-2's byte-to-symbol table, so every byte is one printable vocabulary symbol."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    codes = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            codes.append(256 + extra)
            extra += 1
    table = dict(zip(printable, codes, strict=True))
    return [chr(table[byte]) for byte in range(256)]


@dataclass(frozen=True)
class TinySpec:
    """Shape and weights of one tiny model.

    Attributes:
        seed: weight seed; two models with one seed are identical.
        perturb: relative noise added to the weights of `seed` (0 = exact copy), used to
            make drafts whose agreement with the target can be tuned.
        perturb_seed: seed of that noise.
        vocab_variant: 0 for the shared vocabulary, anything else reorders it (incompatible).
        n_embd, n_layer, n_head, n_ff, n_ctx: architecture.
        logit_scale: multiplies the output matrix; larger makes the model more decisive.
        chat_template: stored as tokenizer.chat_template (None stores none).
        name: general.name.
        special_tokens: the vocabulary's first tokens (BOS is the first).
        special_type: their GGUF token type (3 control, 4 user-defined).
        eos_id: the end-of-sequence token.
        size_label: general.size_label ("" stores none).
    """

    seed: int = 1
    perturb: float = 0.0
    perturb_seed: int = 0
    vocab_variant: int = 0
    n_embd: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_ff: int = 128
    n_ctx: int = 2048
    logit_scale: float = 8.0
    chat_template: str | None = CHATML_TEMPLATE
    name: str = "tiny"
    special_tokens: tuple[str, ...] = tuple(SPECIAL_TOKENS)
    special_type: int = 3
    eos_id: int = 2
    size_label: str = ""


def vocabulary(
    variant: int = 0, *, specials: tuple[str, ...] = tuple(SPECIAL_TOKENS), special_type: int = 3
) -> tuple[list[str], list[int], list[str]]:
    """Tokens, token types and merges of the tiny byte-level BPE vocabulary."""
    symbols = _bytes_to_unicode()
    merged = [merge.replace(" ", "") for merge in MERGES]
    first = list(specials)
    tokens = first + symbols + merged
    # BOS and EOS stay control tokens; the rest take `special_type`.
    types = [3 if index < 2 else special_type for index in range(len(first))]
    types += [1] * (len(symbols) + len(merged))
    merges = list(MERGES)
    if variant:
        # Another vocabulary of the same size: the byte symbols in another order.
        body = symbols[::-1]
        tokens = first + body + merged
    return tokens, types, merges


def padded_vocabulary(n_vocab: int) -> tuple[list[str], list[int], list[str]]:
    """The tiny vocabulary (`vocabulary()`) grown to `n_vocab` tokens with filler tokens, for
    files with a real model's vocabulary size: the output head, and an MTP head's, then cost
    what they cost in the real model.

    The fillers are unique plain-ASCII strings (each character is its own byte-level symbol),
    normal tokens that no merge produces: text never tokenizes into them, but the model can
    emit them and they render as their spelling.
    """
    tokens, types, merges = vocabulary()
    if n_vocab < len(tokens):
        raise ValueError(f"the tiny vocabulary already has {len(tokens)} tokens")
    fillers = [f"<filler{index:06d}>" for index in range(n_vocab - len(tokens))]
    return tokens + fillers, types + [1] * len(fillers), merges


def _weights(spec: TinySpec, n_vocab: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(spec.seed)
    e, f = spec.n_embd, spec.n_ff

    def mat(rows: int, cols: int, scale: float) -> np.ndarray:
        return (rng.standard_normal((rows, cols)) * scale / np.sqrt(cols)).astype(np.float32)

    tensors: dict[str, np.ndarray] = {
        "token_embd.weight": mat(n_vocab, e, np.sqrt(e)),
        "output_norm.weight": np.ones(e, dtype=np.float32),
        "output.weight": mat(n_vocab, e, spec.logit_scale),
    }
    # Quieter special tokens: random weights would otherwise end answers after a few tokens.
    tensors["output.weight"][: len(spec.special_tokens)] *= np.float32(0.2)
    for block in range(spec.n_layer):
        p = f"blk.{block}."
        tensors[p + "attn_norm.weight"] = np.ones(e, dtype=np.float32)
        tensors[p + "ffn_norm.weight"] = np.ones(e, dtype=np.float32)
        for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
            tensors[p + name + ".weight"] = mat(e, e, 1.0)
        tensors[p + "ffn_gate.weight"] = mat(f, e, 1.0)
        tensors[p + "ffn_up.weight"] = mat(f, e, 1.0)
        tensors[p + "ffn_down.weight"] = mat(e, f, 1.0)
    if spec.perturb:
        noise = np.random.default_rng(10_000 + spec.perturb_seed)
        for name, value in tensors.items():
            if value.ndim == 2:
                jitter = noise.standard_normal(value.shape).astype(np.float32)
                tensors[name] = value + jitter * np.float32(spec.perturb) * value.std()
    return tensors


def finish_gguf(
    writer: gguf.GGUFWriter,
    vocab: tuple[list[str], list[int], list[str]] | RealTokenizer,
    *,
    eos_id: int,
    chat_template: str | None,
    tensors: dict[str, np.ndarray],
) -> None:
    """Add the tokenizer (the tiny vocabulary from `vocabulary()`, or a real one), the chat
    template and the tensors to `writer`, and write the file: the part every tiny
    architecture shares."""
    if isinstance(vocab, tuple):
        tokens, types, merges = vocab
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre("qwen2")
        writer.add_token_list(tokens)
        writer.add_token_types(types)
        writer.add_token_merges(merges)
        writer.add_bos_token_id(0)
        writer.add_eos_token_id(eos_id)
        writer.add_add_bos_token(False)
    else:
        vocab.write(writer, eos_id=eos_id)
    if chat_template is not None:
        writer.add_chat_template(chat_template)
    for name, value in tensors.items():
        writer.add_tensor(name, value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def write_tiny_model(
    path: Path,
    spec: TinySpec = TinySpec(),
    *,
    extra: Mapping[str, int] | None = None,
    overrides: Mapping[str, np.ndarray] | None = None,
) -> Path:
    """Write one tiny llama-architecture GGUF to `path` and return it.

    `extra`: more uint32 metadata keys, for a test that needs a file to claim something its
    weights do not hold (e.g. `llama.nextn_predict_layers`, an MTP head). `overrides`
    replace tensors of the seeded ones by name (a test's hand-made weights).
    """
    import gguf  # imported here: only tests and the self-test need the writer

    tokens, types, merges = vocabulary(
        spec.vocab_variant, specials=spec.special_tokens, special_type=spec.special_type
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(spec.name)
    if spec.size_label:
        writer.add_string("general.size_label", spec.size_label)
    writer.add_context_length(spec.n_ctx)
    writer.add_embedding_length(spec.n_embd)
    writer.add_block_count(spec.n_layer)
    writer.add_feed_forward_length(spec.n_ff)
    writer.add_head_count(spec.n_head)
    writer.add_head_count_kv(spec.n_head)
    writer.add_rope_dimension_count(spec.n_embd // spec.n_head)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    for key, value in (extra or {}).items():
        writer.add_uint32(key, value)
    finish_gguf(
        writer,
        (tokens, types, merges),
        eos_id=spec.eos_id,
        chat_template=spec.chat_template,
        tensors={**_weights(spec, len(tokens)), **(overrides or {})},
    )
    return path


@dataclass(frozen=True)
class TinyModels:
    """The standard tiny set.

    Attributes:
        target: the target model.
        draft_same: a draft identical to the target (accepts everything).
        draft_close: a lightly perturbed target (high but imperfect acceptance).
        draft_far: an independent model with the same vocabulary (low acceptance).
        odd_vocab: a model whose vocabulary differs (an incompatible draft).
    """

    target: Path
    draft_same: Path
    draft_close: Path
    draft_far: Path
    odd_vocab: Path


def build_tiny_set(directory: Path) -> TinyModels:
    """Write the standard tiny models into `directory` (skipping files already there)."""
    specs = {
        "target": TinySpec(seed=1, name="tiny-target"),
        "draft_same": TinySpec(seed=1, name="tiny-draft-same"),
        "draft_close": TinySpec(seed=1, perturb=0.15, name="tiny-draft-close"),
        "draft_far": TinySpec(seed=7, name="tiny-draft-far"),
        "odd_vocab": TinySpec(seed=3, vocab_variant=1, name="tiny-odd"),
    }
    files = {}
    for key, spec in specs.items():
        path = directory / f"{spec.name}.gguf"
        if not path.exists():
            tmp = path.with_suffix(".partial")
            write_tiny_model(tmp, spec)
            tmp.replace(path)
        files[key] = path
    return TinyModels(**files)
