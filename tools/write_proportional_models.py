"""Write synthetic GGUFs with real models' shapes and vocabulary sizes, random weights,
quantised to Q4_K_M as the files people run are, to time what a draft head costs against a
target pass (tools/measure_head_costs.py). Nothing they say means anything; only their
sizes, and so their costs, are real.

Usage:
    python tools/write_proportional_models.py [--out DIR] [--only NAME ...] [--threads N]

Files (into ~/.cache/specchat/synthetic/ by default):
    qwen35-0.8b-mtp-Q4_K_M.gguf       513 MiB  Qwen3.5-0.8B with its MTP layer
    gemma4-e2b-Q4_K_M.gguf           3249 MiB  Gemma 4 E2B (text part)
    gemma4-e2b-assistant-Q4_K_M.gguf   65 MiB  its assistant (gemma-4-E2B-it-assistant)
    qwen35-4b-mtp-Q4_K_M.gguf                  Qwen3.5-4B with its MTP layer: only with
                                               --only, as with the others it passes 6 GB
    qwen2.5-1.5b-Q4_K_M.gguf, qwen2.5-0.5b-Q4_K_M.gguf   the default pair's shapes (--only)
    llama-8b-Q4_0.gguf, llama-1b-Q4_0.gguf     an 8B-class target and a 1B-class draft, in
                                               the format of the shipped GPU cost table
                                               (resources/costs/gpu-rtx3090-8b-q4_0.json;
                                               --only: 4.6 GB together)

Shapes (text model only; vision/audio towers are separate mmproj files in llama.cpp):

- Qwen3.5-0.8B (Qwen/Qwen3.5-0.8B config.json text_config; the model card's overview):
  hidden 1024, 24 layers, full_attention_interval 4 (layers 3, 7, ... 23 full attention),
  8 query heads, 2 KV heads, head_dim 256 (partial_rotary_factor 0.25: 64 rotated dims,
  mrope_section [11, 11, 10]), FFN 3584, Gated DeltaNet with 16 key heads and 16 value
  heads of 128 (linear_key/value_head_dim), conv kernel 4, vocabulary 248320,
  tie_word_embeddings true, mtp_num_hidden_layers 1.
- Qwen3.5-4B (Qwen/Qwen3.5-4B config.json): hidden 2560, 32 layers, 16 query heads, 4 KV
  heads, head_dim 256, FFN 9216, 16 key heads and 32 value heads of 128, vocabulary 248320,
  tied embeddings, one MTP layer.
- Qwen2.5-Coder-1.5B / 0.5B (the default pair; Qwen/Qwen2.5-Coder-1.5B-Instruct and -0.5B
  config.json): hidden 1536 / 896, 28 / 24 layers, 12 / 14 query heads, 2 KV heads, FFN
  8960 / 4864, q/k/v biases, vocabulary 151936, tied embeddings, rope base 1e6.
- Llama 3.1 8B (meta-llama/Llama-3.1-8B config.json): hidden 4096, 32 layers, 32 query
  heads, 8 KV heads, FFN 14336, vocabulary 128256, untied output, rope base 500000.
  Llama 3.2 1B (meta-llama/Llama-3.2-1B): hidden 2048, 16 layers, 32 query heads, 8 KV
  heads, FFN 8192, the same vocabulary, tied embeddings. Written as Q4_0, as the shipped
  GPU cost table's pair.
- Gemma 4 E2B (google/gemma-4-E2B-it config.json text_config): hidden 1536, 35 layers
  (four sliding, then one full, seven times), 8 query heads, 1 KV head, head_dim 256
  (sliding) / global_head_dim 512 (full), sliding_window 512, intermediate_size 6144 with
  use_double_wide_mlp (12288 in the 20 num_kv_shared_layers), hidden_size_per_layer_input
  256, vocabulary 262144, final_logit_softcapping 30, tied embeddings.
- Gemma 4 E2B assistant (google/gemma-4-E2B-it-assistant config.json): backbone_hidden_size
  1536, hidden 256, 4 layers (three sliding, one full), 4 query heads, 1 KV head, head_dim
  256 / 512 (the target's: it reads the target's cache), intermediate_size 2048, vocabulary
  262144, tied embeddings.

How llama.cpp lays these out (tensor names, metadata keys, which blocks hold what) is
specchat.tinyarch's, which follows src/models/qwen35.cpp, gemma4.cpp, gemma4-assistant.cpp
and conversion/qwen.py, gemma.py of the llama.cpp that llama-cpp-python 0.3.36 vendors.

How a file is made: specchat.tinyarch's writer lays the model out over
tinymodels.padded_vocabulary (the tiny byte-level vocabulary grown with filler tokens to the
real size) with weights.LayoutMaker, which writes every large matrix as a hole in a sparse
file instead of values; llama.cpp's own quantiser (llama_model_quantize, LLAMA_FTYPE
MOSTLY_Q4_K_M) turns that into the Q4_K_M file, choosing each tensor's type as it does for a
real model: Q6_K for the tied output head and Gemma's per-layer embedding table, Q4_K for
most matrices with some attn_v, attn_qkv and ffn_down in Q6_K, F32 convolution kernels, F16
per_layer_model_proj. Then every block of those matrices is filled with random quants and
scales (in place, a few seconds), so the weights are random and finite rather than zero.
This way no F16 copy of a model is ever written (Gemma 4 E2B's would be 9 GB) and the only
large write is the final file. Small tensors (norms, convolution kernels, small
projections) are seeded random values from the start. Each file is then checked with
SpecChat's GGUF validation and loaded through LlamaModel (with its MTP layer, or its
assistant), which decodes a few tokens and drafts.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "app"), str(ROOT)]

from specchat.tinyarch import (  # noqa: E402
    DenseShape,
    Gemma4Shape,
    write_tiny_dense,
    write_tiny_gemma4,
    write_tiny_gemma4_assistant,
    write_tiny_qwen35,
)
from specchat.tinyarch.qwen35 import QWEN35_0_8B, QWEN35_4B  # noqa: E402
from specchat.tinyarch.weights import LayoutMaker  # noqa: E402
from specchat.tinymodels import padded_vocabulary  # noqa: E402

DEFAULT_OUT = Path.home() / ".cache" / "specchat" / "synthetic"

QWEN35_VOCAB = 248_320
GEMMA4_VOCAB = 262_144
QWEN25_VOCAB = 151_936
LLAMA3_VOCAB = 128_256

GEMMA4_E2B = Gemma4Shape(
    n_embd=1536,
    sliding=(True, True, True, True, False) * 7,
    n_head=8,
    n_head_kv=1,
    head_dim_swa=256,
    head_dim_full=512,
    sliding_window=512,
    n_ff=6144,
    n_ctx=131_072,
    softcap=30.0,
    n_embd_per_layer=256,
    shared_kv_layers=20,
    wide_shared_ffn=True,
)

QWEN25_1_5B = DenseShape(
    arch="qwen2",
    n_embd=1536,
    n_layer=28,
    n_head=12,
    n_head_kv=2,
    n_ff=8960,
    n_ctx=32_768,
    rope_base=1_000_000.0,
    tied_output=True,
)

QWEN25_0_5B = DenseShape(
    arch="qwen2",
    n_embd=896,
    n_layer=24,
    n_head=14,
    n_head_kv=2,
    n_ff=4864,
    n_ctx=32_768,
    rope_base=1_000_000.0,
    tied_output=True,
)

LLAMA_8B = DenseShape(n_embd=4096, n_layer=32, n_head=32, n_head_kv=8, n_ff=14_336, n_ctx=131_072)

LLAMA_1B = DenseShape(
    n_embd=2048, n_layer=16, n_head=32, n_head_kv=8, n_ff=8192, n_ctx=131_072, tied_output=True
)

#: The assistant's own sizes; head sizes, KV heads and window come from the target.
GEMMA4_E2B_ASSISTANT = Gemma4Shape(
    n_embd=256, sliding=(True, True, True, False), n_head=4, n_ff=2048
)


@dataclass(frozen=True)
class Spec:
    """One file: its name, how it is laid out (a tinyarch writer call taking the path and
    the weight maker), whether it is written by default, and its format (Q4_K_M, Q4_0)."""

    name: str
    layout: Callable[[Path, Callable[[int], LayoutMaker]], object]
    default: bool = True
    ftype: str = "Q4_K_M"

    @property
    def file_name(self) -> str:
        return f"{self.name}-{self.ftype}.gguf"


def dense_spec(name: str, shape: DenseShape, vocab: int, *, ftype: str = "Q4_K_M") -> Spec:
    """A dense model's file (written only with --only)."""
    return Spec(
        name,
        lambda path, maker: write_tiny_dense(
            path,
            shape=shape,
            name=f"synthetic-{name}",
            vocab=padded_vocabulary(vocab),
            maker=maker,
        ),
        default=False,
        ftype=ftype,
    )


SPECS = [
    Spec(
        "qwen35-0.8b-mtp",
        lambda path, maker: write_tiny_qwen35(
            path,
            mtp=True,
            shape=QWEN35_0_8B,
            name="synthetic-qwen3.5-0.8b",
            vocab=padded_vocabulary(QWEN35_VOCAB),
            maker=maker,
        ),
    ),
    Spec(
        "gemma4-e2b",
        lambda path, maker: write_tiny_gemma4(
            path,
            shape=GEMMA4_E2B,
            name="synthetic-gemma-4-e2b",
            vocab=padded_vocabulary(GEMMA4_VOCAB),
            maker=maker,
        ),
    ),
    Spec(
        "gemma4-e2b-assistant",
        lambda path, maker: write_tiny_gemma4_assistant(
            path,
            target=GEMMA4_E2B,
            shape=GEMMA4_E2B_ASSISTANT,
            name="synthetic-gemma-4-e2b-assistant",
            vocab=padded_vocabulary(GEMMA4_VOCAB),
            maker=maker,
        ),
    ),
    Spec(
        "qwen35-4b-mtp",
        lambda path, maker: write_tiny_qwen35(
            path,
            mtp=True,
            shape=QWEN35_4B,
            name="synthetic-qwen3.5-4b",
            vocab=padded_vocabulary(QWEN35_VOCAB),
            maker=maker,
        ),
        default=False,
    ),
    dense_spec("qwen2.5-1.5b", QWEN25_1_5B, QWEN25_VOCAB),
    dense_spec("qwen2.5-0.5b", QWEN25_0_5B, QWEN25_VOCAB),
    dense_spec("llama-8b", LLAMA_8B, LLAMA3_VOCAB, ftype="Q4_0"),
    dense_spec("llama-1b", LLAMA_1B, LLAMA3_VOCAB, ftype="Q4_0"),
]


def write_layout(spec: Spec, path: Path) -> set[str]:
    """Write the sparse layout file; return the names of its deferred (F16) matrices."""
    from gguf import GGMLQuantizationType, GGUFReader

    spec.layout(path, LayoutMaker)
    reader = GGUFReader(path)
    names = {t.name for t in reader.tensors if t.tensor_type == GGMLQuantizationType.F16}
    del reader
    return names


def quantize(source: Path, target: Path, threads: int, ftype: str = "Q4_K_M") -> None:
    """llama.cpp's quantiser, as `llama-quantize source target FTYPE threads` runs it."""
    import llama_cpp

    from specchat.engine.llamacpp.backend import ensure_backend, last_error_line

    ensure_backend()
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{ftype}")
    params.nthread = threads
    status = llama_cpp.llama_model_quantize(str(source).encode(), str(target).encode(), params)
    if status != 0:
        raise RuntimeError(f"llama_model_quantize failed ({status}): {last_error_line()}")


#: Per quantised type: bytes per block, and the (offset, value in units of d) of each of its
#: F16 fields, chosen so a block of random quants averages about zero and spreads about
#: `UNIT_SPREAD` units of d (see ggml-common.h for the block layouts).
BLOCKS: dict[str, tuple[int, tuple[tuple[int, float], ...], float]] = {
    "Q4_0": (18, ((0, 1.0),), 4.6),
    "Q4_1": (20, ((0, 1.0), (2, -7.5)), 4.6),
    "Q5_0": (22, ((0, 1.0),), 9.2),
    "Q5_1": (24, ((0, 1.0), (2, -15.5)), 9.2),
    "Q8_0": (34, ((0, 1.0),), 74.0),
    "Q2_K": (84, ((80, 1.0), (82, 1.5)), 8.0),
    "Q3_K": (110, ((108, 1.0),), 70.0),
    "Q4_K": (144, ((0, 1.0), (2, 7.5)), 250.0),
    "Q5_K": (176, ((0, 1.0), (2, 15.5)), 500.0),
    "Q6_K": (210, ((208, 1.0),), 1366.0),
}

CHUNK = 64 << 20


def fill(path: Path, deferred: set[str], seed: int = 0) -> Counter[str]:
    """Give every deferred matrix of the quantised file random values in place, spread as
    WeightMaker.mat's (1 / sqrt(row length)); return the bytes per ggml type of the file's
    tensors."""
    from gguf import GGUFReader

    reader = GGUFReader(path, "r+")
    rng = np.random.default_rng(seed)
    sizes: Counter[str] = Counter()
    for tensor in reader.tensors:
        kind = tensor.tensor_type.name
        sizes[kind] += int(tensor.n_bytes)
        if tensor.name not in deferred:
            continue
        std = 1.0 / float(np.sqrt(int(tensor.shape[0])))
        data = reader.data[tensor.data_offset : tensor.data_offset + tensor.n_bytes]
        if kind in ("F16", "F32"):
            dtype = np.float16 if kind == "F16" else np.float32
            values = data.view(dtype)
            for start in range(0, values.size, CHUNK // 4):
                part = values[start : start + CHUNK // 4]
                part[:] = (rng.standard_normal(part.size, dtype=np.float32) * std).astype(dtype)
            continue
        if kind not in BLOCKS:
            raise RuntimeError(f"{tensor.name}: no random fill for {kind} blocks")
        block, fields, spread = BLOCKS[kind]
        blocks = data.reshape(-1, block)
        d = std / spread
        per_chunk = max(1, CHUNK // block)
        for start in range(0, len(blocks), per_chunk):
            chunk = blocks[start : start + per_chunk]
            chunk[:] = rng.integers(0, 256, size=chunk.shape, dtype=np.uint8)
            for offset, units in fields:
                half = np.frombuffer(np.float16(d * units).tobytes(), dtype=np.uint8)
                chunk[:, offset : offset + 2] = half
    reader.data.flush()
    del reader
    return sizes


def check(files: dict[str, Path]) -> None:
    """SpecChat's GGUF validation, then a load through LlamaModel that decodes and drafts."""
    from specchat.engine.drafting.mtp import load_assistant
    from specchat.engine.drafting.mtp.mtp_driver import DraftHead
    from specchat.engine.llamacpp.model import LlamaModel
    from specchat.models.gguf_reader import validate

    for name, path in files.items():
        validate(path)
        print(f"  {name}: SpecChat's GGUF validation passed")
    for name, path in files.items():
        if "assistant" in name:
            continue
        qwen = name.startswith("qwen35")
        with LlamaModel(path, n_ctx=2048, n_threads=2, load_mtp=qwen) as target:
            if qwen:
                head = DraftHead(target)
            else:
                assistant = files.get(f"{name}-assistant")
                if assistant is None:
                    print(f"  {name}: loaded ({target.n_vocab} tokens)")
                    continue
                head = load_assistant(assistant, target)
            prompt = target.tokenize("<|im_start|>user\nhello there<|im_end|>\n")
            target.decode(prompt)
            drafted = head.draft(prompt[-1], 3)
            print(
                f"  {name}: loaded ({target.n_vocab} tokens, has_mtp={target.has_mtp}); "
                f"decoded {len(prompt)} tokens; {head.name} drafted {drafted}"
            )


def write_file(spec: Spec, out: Path, *, threads: int, quiet: bool = False) -> Path:
    """Write `spec`'s file into `out` (layout, quantise, fill) and return its path."""
    out.mkdir(parents=True, exist_ok=True)
    target = out / spec.file_name
    layout = out / f"{spec.name}.layout.partial.gguf"
    started = time.perf_counter()
    try:
        deferred = write_layout(spec, layout)
        partial = target.with_suffix(".partial")
        quantize(layout, partial, threads, spec.ftype)
    finally:
        layout.unlink(missing_ok=True)
    sizes = fill(partial, deferred)
    os.replace(partial, target)
    if not quiet:
        mix = ", ".join(f"{kind} {size / 2**20:.0f} MiB" for kind, size in sizes.most_common())
        print(
            f"{target} {target.stat().st_size / 2**20:.0f} MiB in "
            f"{time.perf_counter() - started:.0f} s ({mix})"
        )
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--only", nargs="+", choices=[spec.name for spec in SPECS])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-check", action="store_true")
    args = parser.parse_args()

    chosen = [s for s in SPECS if (s.name in args.only if args.only else s.default)]
    files = {spec.name: write_file(spec, args.out, threads=args.threads) for spec in chosen}
    if not args.no_check:
        check(files)


if __name__ == "__main__":
    main()
