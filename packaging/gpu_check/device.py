"""Step: llama.cpp alone, through its C API, offloads the tiny target and decodes with it.

Runs before SpecChat's engine is asked to do anything on the device, so that a machine where
llama.cpp itself cannot offload (a driver, a runtime, a sandbox) is told apart from a fault
of SpecChat's. Each try runs in a process of its own, first as built, then with the CUDA
backend's optional paths turned off by its own environment variables (pinned host buffers,
CUDA graphs); the first that decodes is the one every later step runs with, and the report
names it. A try decodes the same prompt with every layer on the device and with none and
reports both greedy continuations (they may part at a near tie; the exactness step judges).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
from typing import Any

from gpu_check import child

#: Token ids of the tiny byte-level vocabulary: a prompt of twenty, then greedy tokens.
PROMPT = tuple(range(40, 60))
GREEDY_TOKENS = 8
#: n_gpu_layers asking for every layer (llama.cpp clamps it to the model's).
ALL_LAYERS = 999


def greedy(path: str, n_gpu_layers: int, threads: int) -> list[int]:
    """The tiny model's greedy continuation of PROMPT, with `n_gpu_layers` offloaded."""
    import llama_cpp
    import numpy as np

    model_params = llama_cpp.llama_model_default_params()
    model_params.n_gpu_layers = n_gpu_layers
    model = llama_cpp.llama_model_load_from_file(path.encode(), model_params)
    if not model:
        raise RuntimeError(f"llama.cpp could not load {path} with {n_gpu_layers} layers offloaded")
    try:
        context_params = llama_cpp.llama_context_default_params()
        context_params.n_ctx = 256
        context_params.n_threads = context_params.n_threads_batch = threads
        ctx = llama_cpp.llama_init_from_model(model, context_params)
        if not ctx:
            raise RuntimeError("llama.cpp could not make a context")
        try:
            n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model))
            tokens: list[int] = []
            feed = list(PROMPT)
            for _ in range(GREEDY_TOKENS):
                ids = (llama_cpp.llama_token * len(feed))(*feed)  # held while it decodes
                batch = llama_cpp.llama_batch_get_one(ids, len(feed))
                status = llama_cpp.llama_decode(ctx, batch)
                if status != 0:
                    raise RuntimeError(f"llama_decode returned {status}")
                row = ctypes.cast(
                    llama_cpp.llama_get_logits_ith(ctx, -1), ctypes.POINTER(ctypes.c_float)
                )
                feed = [int(np.argmax(np.ctypeslib.as_array(row, (n_vocab,))))]
                tokens.append(feed[0])
            return tokens
        finally:
            llama_cpp.llama_free(ctx)
    finally:
        llama_cpp.llama_model_free(model)


#: What each try changes, in the order tried: llama.cpp's CUDA backend reads these.
TRIES: tuple[tuple[str, dict[str, str]], ...] = (
    ("as built", {}),
    ("no pinned host buffers", {"GGML_CUDA_NO_PINNED": "1"}),
    ("no CUDA graphs", {"GGML_CUDA_DISABLE_GRAPHS": "1"}),
    ("neither", {"GGML_CUDA_NO_PINNED": "1", "GGML_CUDA_DISABLE_GRAPHS": "1"}),
)


def probe(args: argparse.Namespace) -> dict[str, Any]:
    """One try, in this process: the greedy tokens on the device and on the CPU."""
    from specchat.engine.llamacpp.backend import compute_backends
    from specchat.tinymodels import build_tiny_set

    backends = compute_backends()  # initialises llama.cpp, its log echoed where asked
    target = build_tiny_set(args.work / "tiny").target
    offloaded = ALL_LAYERS if args.n_gpu_layers < 0 else args.n_gpu_layers
    on_device = greedy(str(target), offloaded, args.threads)
    on_cpu = greedy(str(target), 0, args.threads)
    return {
        "backends": backends.describe(),
        "devices": list(backends.devices),
        "greedy_offloaded": on_device,
        "greedy_cpu": on_cpu,
        "same_tokens": on_device == on_cpu,
    }


def run(args: argparse.Namespace, deadline: child.Deadline) -> dict[str, Any]:
    if args.probe:
        return probe(args)
    tried: dict[str, str] = {}
    for name, changes in TRIES:
        result = args.result.with_name(f"{args.result.stem}-try.json")
        result.unlink(missing_ok=True)
        command = [sys.executable, "-X", "faulthandler", "-m", "gpu_check.device", "--probe"]
        command += ["--result", str(result), "--work", str(args.work), "--out", str(args.out)]
        command += ["--threads", str(args.threads), "--n-gpu-layers", str(args.n_gpu_layers)]
        print(f"--- device try: {name} {changes}", flush=True)
        try:
            code = subprocess.run(
                command, env={**os.environ, **changes}, timeout=max(1.0, deadline.left())
            ).returncode
        except subprocess.TimeoutExpired:
            tried[name] = "out of time"
            break
        if code == 0 and result.exists():
            found = json.loads(result.read_text(encoding="utf-8"))
            return {**found, "tried": {**tried, name: "ok"}, "try": name, "env": changes}
        tried[name] = f"exit status {code}"
    return {"tried": tried, "error": "llama.cpp could not decode on the device in any try"}


def options() -> argparse.ArgumentParser:
    parser = child.options(__doc__ or "")
    parser.add_argument("--probe", action="store_true", help="one try, in this process")
    return parser


if __name__ == "__main__":
    child.main(__doc__ or "", run, options())
