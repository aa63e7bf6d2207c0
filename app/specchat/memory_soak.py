"""Soak run: generate continuously and sample memory, to show it stays flat."""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import cycle

from specchat.engine.drafting.registry import FALLBACK, mode_names, needs_model
from specchat.engine.session import ChatEngine
from specchat.engine.templates.chat_template import ChatMessage
from specchat.engine.types import Controls, GenerationRequest, SamplingParams

QUESTIONS = (
    "Write a Python function that merges two sorted lists.",
    "Explain what a hash map is in three sentences.",
    "Rewrite this line with better names: x = [a for a in b if a > c]",
    "List five fruits as JSON.",
)


def rss_bytes() -> int:
    """Resident set size of this process now (Linux /proc; peak RSS elsewhere)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            pages = int(handle.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if os.uname().sysname == "Darwin" else peak * 1024


@dataclass(frozen=True)
class SoakSample:
    """One memory sample.

    Attributes:
        elapsed_s: seconds since the soak began.
        rss: resident bytes.
        tokens: tokens generated so far.
        answers: answers finished so far.
    """

    elapsed_s: float
    rss: int
    tokens: int
    answers: int


#: Answers the warm-up lasts at least: the soak cycles 5 modes and K from 1 to 8, and each
#: (mode, K) sizes its own buffers (llama.cpp's batch, the logits rows) the first time.
WARMUP_ANSWERS = 40
#: Answers measured after the warm-up, at least.
MEASURED_ANSWERS = 8

#: Growth per answer after warm-up that fails a soak: 4 KiB an answer is 40 MiB over
#: 10,000 answers (weeks of use). A leak of a few MB over a soak's few hundred answers is
#: several times more than this.
GROWTH_PER_ANSWER_LIMIT = 4096


@dataclass(frozen=True)
class SoakReport:
    """The outcome of a soak.

    Attributes:
        samples: memory after every answer.
        warmup_rss: RSS when warm-up ended (the baseline).
        final_rss: mean RSS over the last quarter of the run.
        growth: (final − warm-up) ÷ warm-up.
        growth_per_answer: bytes RSS grows per answer after warm-up: the Theil–Sen slope
            (median of pairwise slopes), which a one-off step (an allocator arena, a page
            cache) cannot sway but a steady leak does.
    """

    samples: tuple[SoakSample, ...]
    warmup_rss: int
    final_rss: int
    growth: float
    growth_per_answer: float

    @property
    def passed(self) -> bool:
        return self.growth_per_answer < GROWTH_PER_ANSWER_LIMIT


def soak(
    engine: ChatEngine,
    *,
    seconds: float = float("inf"),
    answers: int | None = None,
    warmup_fraction: float = 0.25,
    max_tokens: int = 48,
    turns_per_chat: int = 4,
    on_sample: Callable[[SoakSample], None] | None = None,
) -> SoakReport:
    """Chat for `seconds` (or `answers` answers) through every mode; sample RSS per answer.

    Conversations grow for a few turns (exercising cache reuse), then start over; modes,
    temperatures and K rotate so every path allocates and frees its buffers.
    """
    modes = cycle(mode_names())  # auto, every registered drafter, plain
    temperatures = cycle([0.0, 0.8])
    questions = cycle(QUESTIONS)
    began = time.perf_counter()
    samples: list[SoakSample] = []
    tokens = done = 0
    messages: list[ChatMessage] = []
    has_draft = engine.draft is not None
    while time.perf_counter() - began < seconds and (answers is None or done < answers):
        if len(messages) >= 2 * turns_per_chat:
            messages = []
        messages.append(ChatMessage("user", next(questions)))
        mode = next(modes)
        if not has_draft and needs_model(mode):
            mode = FALLBACK
        answer = []
        controls = Controls(
            mode, 1 + done % 8, SamplingParams(temperature=next(temperatures), seed=done)
        )
        prepared = engine.prepare(messages, max_tokens=max_tokens)
        for result in engine.generate(GenerationRequest(prepared.tokens, max_tokens, controls)):
            answer.append(result.text)
            tokens += len(result.events)
        messages.append(ChatMessage("assistant", "".join(answer)))
        done += 1
        sample = SoakSample(time.perf_counter() - began, rss_bytes(), tokens, done)
        samples.append(sample)
        if on_sample:
            on_sample(sample)
    return summarise(samples, warmup_fraction=warmup_fraction)


def summarise(samples: list[SoakSample], *, warmup_fraction: float) -> SoakReport:
    """Growth after warm-up: the first `warmup_fraction` of the answers, and at least
    WARMUP_ANSWERS of them."""
    needed = WARMUP_ANSWERS + MEASURED_ANSWERS
    if len(samples) < needed:
        raise ValueError(
            f"soak too short: {len(samples)} answers, fewer than {needed} (a warm-up of "
            f"{WARMUP_ANSWERS}, every mode at every K, then {MEASURED_ANSWERS})"
        )
    warm = samples[max(WARMUP_ANSWERS, int(len(samples) * warmup_fraction)) :]
    baseline = warm[0].rss
    last_quarter = [s.rss for s in samples[int(len(samples) * 0.75) :]]
    final = int(sum(last_quarter) / len(last_quarter))
    return SoakReport(
        tuple(samples),
        baseline,
        final,
        (final - baseline) / baseline,
        growth_per_answer=theil_sen_slope([s.answers for s in warm], [s.rss for s in warm]),
    )


def theil_sen_slope(xs: Sequence[float], ys: Sequence[float], *, points: int = 400) -> float:
    """Median of the slopes between every pair of (up to `points` evenly spread) points."""
    import numpy as np

    pick = np.unique(np.linspace(0, len(xs) - 1, min(points, len(xs))).astype(int))
    x = np.asarray(xs, dtype=np.float64)[pick]
    y = np.asarray(ys, dtype=np.float64)[pick]
    i, j = np.triu_indices(len(x), k=1)
    dx = x[j] - x[i]
    keep = dx != 0
    return float(np.median((y[j] - y[i])[keep] / dx[keep])) if keep.any() else 0.0
