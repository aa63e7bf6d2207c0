"""The best any prompt-lookup policy could do on an answer, if it knew the answer in advance.

Given the plain answer at temperature 0 and the measured cost of target passes by size, a
dynamic programme over positions picks, at every round, plain or a lookup draft of the best
length. No causal policy can beat it, so it tells a policy's shortfall (room to improve)
from the machine's (no policy could do better on these costs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from specchat.engine.decoding.schedule import MAX_LOOKUP_K
from specchat.engine.drafting import PromptLookupDrafter


def lookup_ceiling(
    prompt: Sequence[int],
    answer: Sequence[int],
    batch_ms: Mapping[int, float],
    *,
    max_k: int = MAX_LOOKUP_K,
    lookup: PromptLookupDrafter | None = None,
) -> float:
    """Speed-up over plain of the best sequence of plain and lookup rounds for `answer`.

    Pass costs between measured sizes are interpolated; K stops at the largest size measured
    minus one, so nothing is extrapolated.
    """
    if not answer:
        return 1.0
    lookup = lookup or PromptLookupDrafter()
    sizes = sorted(batch_ms)
    costs = np.interp(np.arange(max(sizes) + 1), sizes, [batch_ms[n] for n in sizes])
    max_k = min(max_k, max(sizes) - 1)
    text = [*prompt, *answer]
    n = len(answer)
    # kept[i]: how many leading tokens of lookup's proposal at answer position i are right.
    kept = []
    offered = []
    for i in range(n):
        proposal, _ = lookup.find(text[: len(prompt) + i], min(max_k, n - i - 1))
        agree = 0
        while agree < len(proposal) and proposal[agree] == answer[i + agree]:
            agree += 1
        kept.append(agree)
        offered.append(len(proposal))
    best = [0.0] * (n + 1)
    for i in range(n - 1, -1, -1):
        options = [best[i + 1] + costs[1]]
        for k in range(1, offered[i] + 1):
            options.append(best[min(n, i + min(k, kept[i]) + 1)] + costs[k + 1])
        best[i] = min(options)
    return float(n * costs[1] / best[0])
