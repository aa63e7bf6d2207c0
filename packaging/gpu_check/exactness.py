"""Step: speculative against plain decoding at T = 0 on the tiny pair and tiny hybrid."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpu_check import child

#: The engine tests' prompts (tests/helpers/engine.py): a chat turn, a repetitive one, text.
PROMPTS = (
    "<|im_start|>user\nWrite a function that adds two numbers.<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nthe cat sat on the mat, the cat sat on the hat<|im_end|>\n"
    "<|im_start|>assistant\n",
    "hello world, hello there, hello again",
)
#: Tokens an answer may run to; --small answers are shorter.
MAX_TOKENS, SMALL_MAX_TOKENS = 200, 80
#: A divergence where plain's top two logits were closer than this is a near tie that the
#: batch's other kernels may round apart (tests/engine/test_draft_heads.py, NEAR_TIE); on a
#: device whose batches round further apart, twice the largest gap measured (each of the
#: two logits may move by it), whichever is more.
NEAR_TIE = 0.1
#: Rows of the batches the noise is measured at: the verification passes of K = 4 and less.
NOISE_SIZES = (2, 4, 8)


def generate(decoder: Any, prompt: Sequence[int], mode: str, k: int, max_tokens: int) -> list:
    """The decoder's rounds for `prompt` at T = 0 in `mode` with drafts of `k`."""
    from specchat.engine.types import Controls, GenerationRequest

    request = GenerationRequest(
        prompt_tokens=tuple(prompt), max_tokens=max_tokens, controls=Controls(mode, k)
    )
    return list(decoder.generate(request))


def near_tie(model: Any) -> tuple[float, dict[str, float]]:
    """The margin below which a parting is a near tie on this device for `model`, and the
    batch noise it comes from (rows: largest logit gap); the model's cache is left empty."""
    from specchat.bench.live.quality import batch_noise

    noise = batch_noise(model, model.tokenize(PROMPTS[0]), sizes=NOISE_SIZES, cached=32)
    model.reset()
    return max(NEAR_TIE, 2.0 * max(noise.values())), {str(n): round(g, 5) for n, g in noise.items()}


def compare(
    decoder: Any, modes: Sequence[tuple[str, int]], max_tokens: int, tie: float = NEAR_TIE
) -> list[dict]:
    """Each mode against plain on every prompt; a parting where plain's margin is below
    `tie` is a near tie."""
    cases = []
    for text in PROMPTS:
        prompt = decoder.target.tokenize(text)
        plain = generate(decoder, prompt, "plain", 1, max_tokens)
        plain_events = [e for r in plain for e in r.events]
        for mode, k in modes:
            rounds = generate(decoder, prompt, mode, k, max_tokens)
            tokens = [e.token for r in rounds for e in r.events]
            expected = [e.token for e in plain_events]
            case: dict[str, Any] = {
                "prompt": text[:40],
                "mode": mode,
                "k": k,
                "tokens": len(tokens),
                "drafted": sum(r.drafted for r in rounds),
                "accepted": sum(r.accepted for r in rounds),
                "identical": tokens == expected,
            }
            if tokens != expected:
                at = next(
                    (i for i, (a, b) in enumerate(zip(tokens, expected, strict=False)) if a != b),
                    min(len(tokens), len(expected)),
                )
                case["diverged_at"] = at
                if at < len(plain_events):
                    case["plain_margin"] = round(float(plain_events[at].margin), 4)
                    case["near_tie"] = plain_events[at].margin < tie
            cases.append(case)
    return cases


def tiny_pair(folder: Path, args: argparse.Namespace, max_tokens: int) -> dict[str, Any]:
    """The tests' tiny llama pair: a target and a lightly perturbed copy as its draft."""
    from specchat.engine.decoding.decoder import SpeculativeDecoder
    from specchat.engine.drafting.base import LoadedPair
    from specchat.engine.llamacpp.model import LlamaModel
    from specchat.tinymodels import build_tiny_set

    tiny = build_tiny_set(folder)
    load = dict(n_ctx=1024, n_gpu_layers=args.n_gpu_layers, n_threads=args.threads)
    with LlamaModel(tiny.target, **load) as target, LlamaModel(tiny.draft_close, **load) as draft:
        tie, noise = near_tie(target)
        decoder = SpeculativeDecoder(LoadedPair.of(target, draft))
        modes = [("draft", 4), ("lookup", 4), ("chain", 4), ("auto", 4)]
        return {"near_tie": tie, "noise": noise, "cases": compare(decoder, modes, max_tokens, tie)}


def tiny_hybrid(folder: Path, args: argparse.Namespace, max_tokens: int) -> dict[str, Any]:
    """The tests' tiny Qwen3.5 hybrid with its MTP head, and a perturbed copy as a draft
    model: every rejected draft rolls the recurrent state back."""
    from specchat.engine.decoding.decoder import SpeculativeDecoder
    from specchat.engine.drafting.base import LoadedPair
    from specchat.engine.llamacpp.model import LlamaModel
    from specchat.tinyarch import write_tiny_qwen35

    target_file = folder / "qwen35-mtp.gguf"
    draft_file = folder / "qwen35-close.gguf"
    if not target_file.exists():
        write_tiny_qwen35(target_file, seed=1, mtp=True)
    if not draft_file.exists():
        write_tiny_qwen35(draft_file, seed=1, perturb=0.01, mtp=False)
    load = dict(n_ctx=1024, n_gpu_layers=args.n_gpu_layers, n_threads=args.threads)
    with (
        LlamaModel(target_file, load_mtp=True, **load) as target,
        LlamaModel(draft_file, **load) as draft,
    ):
        tie, noise = near_tie(target)
        decoder = SpeculativeDecoder(LoadedPair.of(target, draft))
        cases = compare(decoder, [("draft", 4), ("mtp", 3)], max_tokens, tie)
        return {"near_tie": tie, "noise": noise, "cases": cases}


def run(args: argparse.Namespace, deadline: child.Deadline) -> dict[str, Any]:
    folder = args.work / "tiny"
    folder.mkdir(parents=True, exist_ok=True)
    max_tokens = SMALL_MAX_TOKENS if args.small else MAX_TOKENS
    results = {
        "tiny_pair": tiny_pair(folder, args, max_tokens),
        "tiny_hybrid": tiny_hybrid(folder, args, max_tokens),
    }
    cases = [case for found in results.values() for case in found["cases"]]
    parted = [c for c in cases if not c["identical"]]
    results_out: dict[str, Any] = {
        **results,
        "cases": len(cases),
        "identical": len(cases) - len(parted),
        "near_ties": sum(1 for c in parted if c.get("near_tie")),
    }
    if any(not c.get("near_tie") for c in parted):
        results_out["error"] = "speculative output parted from plain away from a near tie"
    return results_out


if __name__ == "__main__":
    child.main(__doc__ or "", run)
