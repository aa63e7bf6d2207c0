"""What the suffix index costs: building it over stored messages, a token's update and lookup,
and its memory."""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Sequence

from specchat.engine.suffix.index import Source, SuffixIndex

#: Stored messages the build is timed over (the goal: under a second for a thousand).
STORED_MESSAGES = 1000


def measure_index_cost(
    texts: Sequence[Sequence[int]], *, messages: int = STORED_MESSAGES, k: int = 16
) -> dict[str, float]:
    """Time the index on token texts (answers and prompts of this run).

    Builds `messages` stored messages (the texts in turn, as two-message conversations),
    timing the build alone (tokenizing is the store loader's, on its thread); then appends
    every token of the texts to a chat, proposing after each, as decoding does.
    """
    texts = [list(t) for t in texts if t]
    if not texts:
        return {}
    conversations = [
        [*texts[(2 * i) % len(texts)], *texts[(2 * i + 1) % len(texts)]]
        for i in range(messages // 2)
    ]

    def build() -> SuffixIndex:
        index = SuffixIndex(background=False, max_stored_tokens=10**9)
        with index.deferred():
            for key, tokens in enumerate(conversations):
                index.put(key, tokens, source=Source.HISTORY, order=float(key))
        return index

    # Timed without tracing (tracemalloc slows every allocation), then traced once more.
    began = time.perf_counter()
    index = build()
    build_s = time.perf_counter() - began
    tracemalloc.start()
    build()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    stored = index.stats()

    stream = [token for text in texts for token in text]
    index.prepare(stream[:1])
    began = time.perf_counter()
    for token in stream[1:]:
        index.append(token)
        index.propose(k)
    per_token_ms = (time.perf_counter() - began) * 1000.0 / max(1, len(stream) - 1)
    return {
        "stored_messages": float(2 * len(conversations)),
        "stored_tokens": float(stored.stored_tokens),
        "build_s": build_s,
        "build_us_per_token": build_s * 1e6 / max(1, stored.stored_tokens),
        "per_token_ms": per_token_ms,
        "shards": float(stored.shards),
        "memory_mb": stored.memory_bytes / 1e6,
        "traced_peak_mb": peak / 1e6,
    }


def render_index_cost(cost: dict[str, float]) -> list[str]:
    if not cost:
        return []
    return [
        "",
        "## Suffix index cost",
        "",
        f"Building it over {cost['stored_messages']:.0f} stored messages "
        f"({cost['stored_tokens']:,.0f} tokens, {cost['shards']:.0f} shards): "
        f"{cost['build_s']:.2f} s ({cost['build_us_per_token']:.1f} µs a token). "
        f"Per token of the chat, update and lookup together: {cost['per_token_ms'] * 1000:.0f} µs. "
        f"Memory: about {cost['memory_mb']:.0f} MB estimated, "
        f"{cost['traced_peak_mb']:.0f} MB traced at peak while building.",
    ]
