"""Exact verification of draft tokens: greedy prefix match, or rejection sampling."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from specchat.engine.sampling import argmax_and_margin, greedy_pick, probabilities, sample
from specchat.engine.types import SamplingParams


@dataclass(frozen=True)
class Verdict:
    """The outcome of checking one round's drafts against the target's logits.

    Attributes:
        n_accepted: how many leading draft tokens were kept.
        next_token: the target's token after them (a correction, or the bonus token).
        p_target: target probability of each kept draft token and then of next_token.
        p_draft: the drafter's probability of each emitted token (0 for a correction a
            deterministic drafter did not propose; None for the bonus token).
        margins: the target's top-1 minus top-2 logit at each emitted position.
    """

    n_accepted: int
    next_token: int
    p_target: tuple[float, ...]
    p_draft: tuple[float | None, ...]
    margins: tuple[float, ...]


def verify(
    drafts: Sequence[int],
    draft_probs: Sequence[np.ndarray] | None,
    target_logits: np.ndarray,
    params: SamplingParams,
    rng: np.random.Generator,
) -> Verdict:
    """Check `drafts` against `target_logits` (one row per draft token, plus one).

    `draft_probs` holds the drafter's probability vector q for each draft token, or None for
    a deterministic drafter (q is then one-hot at the draft token). Greedy settings keep the
    prefix equal to the target's argmax; otherwise a draft token d is kept with probability
    min(1, p(d)/q(d)) and the first rejection is replaced by a sample from
    normalize(max(0, p − q)), which makes the output law exactly the target's.
    """
    if target_logits.shape[0] != len(drafts) + 1:
        raise ValueError(f"need {len(drafts) + 1} rows of logits, got {target_logits.shape[0]}")
    p_target: list[float] = []
    p_draft: list[float | None] = []
    margins: list[float] = []
    for i, token in enumerate(drafts):
        row = target_logits[i]
        q = draft_probs[i] if draft_probs is not None else None
        q_token = float(q[token]) if q is not None else 1.0
        if params.greedy:
            # Kept or not, the row's emitted token is its top: its probability is the top's.
            top, margin, p_top = greedy_pick(row)
            margins.append(margin)
            p_target.append(p_top)
            if token == top:
                p_draft.append(q_token)
                continue
            p_draft.append(float(q[top]) if q is not None else 0.0)
            return Verdict(i, top, tuple(p_target), tuple(p_draft), tuple(margins))
        _, margin = argmax_and_margin(row)
        margins.append(margin)
        p = probabilities(row, params)
        p_token = float(p[token])
        if q_token > 0 and rng.random() < min(1.0, p_token / q_token):
            p_target.append(p_token)
            p_draft.append(q_token)
            continue
        residual = p.copy()
        if q is None:
            residual[token] = 0.0  # max(0, p − one_hot(token))
        else:
            np.subtract(residual, q, out=residual)
            np.maximum(residual, 0.0, out=residual)
        if residual.sum() <= 0.0:
            # Only reachable through rounding when p == q: the law is then p itself.
            residual = p
        corrected = sample(residual / residual.sum(), rng)
        p_target.append(float(p[corrected]))
        p_draft.append(float(q[corrected]) if q is not None else 0.0)
        return Verdict(i, corrected, tuple(p_target), tuple(p_draft), tuple(margins))
    bonus_row = target_logits[len(drafts)]
    if params.greedy:
        bonus, margin, p_bonus = greedy_pick(bonus_row)
        margins.append(margin)
    else:
        _, margin = argmax_and_margin(bonus_row)
        margins.append(margin)
        p = probabilities(bonus_row, params)
        bonus = sample(p, rng)
        p_bonus = float(p[bonus])
    p_target.append(p_bonus)
    p_draft.append(None)
    return Verdict(len(drafts), bonus, tuple(p_target), tuple(p_draft), tuple(margins))
