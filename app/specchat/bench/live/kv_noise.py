"""Each KV cache type's batch noise on the bench's target: what choosing the cache changes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from specchat.bench.live.quality import NOISE_CONTEXT, NOISE_SIZES, batch_noise, texts
from specchat.bench.prompts import BenchPrompt
from specchat.engine.llamacpp.model import LlamaModel
from specchat.engine.types import KV_CACHES


def cache_noise(
    target: Path,
    prompts: Sequence[BenchPrompt],
    *,
    in_use: str,
    n_threads: int | None = None,
    gpu_layers: int = -1,
) -> dict[str, object]:
    """The cache the bench ran with and, for every cache type, the key type a context got
    and its batch noise (bench/live/quality.py's `batch_noise`) on the bench's own texts: the
    largest |logit| gap between a batch's rows and the same positions decoded one at a time,
    after NOISE_CONTEXT cached tokens."""
    n_ctx = NOISE_CONTEXT + max(NOISE_SIZES) + 64
    measured: dict[str, object] = {}
    for cache in KV_CACHES:
        with LlamaModel(
            target,
            n_ctx=n_ctx,
            n_gpu_layers=gpu_layers,
            n_threads=n_threads,
            exact_keys=cache == "q8_0",
        ) as model:
            context = [
                token
                for text in texts(prompts)
                for token in model.tokenize(text, add_special=False, parse_special=False)
            ]
            noise = batch_noise(model, context)
            measured[cache] = {
                "key_type": model.info.key_type,
                "batch_noise": {str(n): round(v, 6) for n, v in noise.items()},
            }
    return {"in_use": in_use, "context_tokens": NOISE_CONTEXT, "caches": measured}
