"""Greedy decoding with LlamaModel, and how often a draft picks the target's tokens."""

from __future__ import annotations

import numpy as np

from specchat.engine.llamacpp.model import LlamaModel


def greedy_tokens(model: LlamaModel, prompt: str, n: int = 60) -> tuple[list[int], list[int]]:
    """The prompt's tokens and up to `n` greedily chosen ones after it (the end-of-generation
    token included when one is chosen)."""
    model.reset()
    prompt_tokens = model.tokenize(prompt)
    logits = model.decode(prompt_tokens)
    chosen: list[int] = []
    for _ in range(n):
        token = int(np.argmax(logits[-1]))
        chosen.append(token)
        if model.is_eog(token):
            break
        logits = model.decode([token])
    return prompt_tokens, chosen


def agreement(target: LlamaModel, draft: LlamaModel, prompt: str, n: int = 60) -> float:
    """The share of the target's greedy tokens that the draft also picks first, each read
    after the target's own text (teacher forcing)."""
    prompt_tokens, chosen = greedy_tokens(target, prompt, n)
    draft.reset()
    rows = draft.decode(prompt_tokens + chosen[:-1], logits="all")[len(prompt_tokens) - 1 :]
    return float(np.mean(rows.argmax(axis=1) == np.array(chosen)))
