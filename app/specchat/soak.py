"""Soak run: generate continuously and sample memory, to show it stays flat."""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from itertools import cycle

from specchat.engine.chat_template import ChatMessage
from specchat.engine.session import ChatEngine
from specchat.engine.types import DraftMode, SamplingParams

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


@dataclass(frozen=True)
class SoakReport:
    """The outcome of a soak.

    Attributes:
        samples: memory over time.
        warmup_rss: RSS when warm-up ended (the baseline).
        final_rss: mean RSS over the last quarter of the run.
        growth: (final − warm-up) ÷ warm-up.
    """

    samples: tuple[SoakSample, ...]
    warmup_rss: int
    final_rss: int
    growth: float


def soak(
    engine: ChatEngine,
    *,
    seconds: float,
    warmup_fraction: float = 0.25,
    max_tokens: int = 48,
    turns_per_chat: int = 4,
    on_sample: Callable[[SoakSample], None] | None = None,
) -> SoakReport:
    """Chat continuously for `seconds` through every drafting mode; sample RSS per answer.

    Conversations grow for a few turns (exercising cache reuse), then start over; modes,
    temperatures and K rotate so every path allocates and frees its buffers.
    """
    modes = cycle(
        [DraftMode.AUTO, DraftMode.DRAFT, DraftMode.LOOKUP, DraftMode.CHAIN, DraftMode.PLAIN]
    )
    temperatures = cycle([0.0, 0.8])
    questions = cycle(QUESTIONS)
    began = time.perf_counter()
    samples: list[SoakSample] = []
    tokens = answers = 0
    messages: list[ChatMessage] = []
    has_draft = engine.draft is not None
    while time.perf_counter() - began < seconds:
        if len(messages) >= 2 * turns_per_chat:
            messages = []
        messages.append(ChatMessage("user", next(questions)))
        mode = next(modes)
        if not has_draft and mode in (DraftMode.DRAFT, DraftMode.CHAIN):
            mode = DraftMode.LOOKUP
        answer = []
        for result in engine.chat(
            messages,
            max_tokens=max_tokens,
            sampling=SamplingParams(temperature=next(temperatures), seed=answers),
            mode=mode,
            k=1 + answers % 8,
        ):
            answer.append(result.text)
            tokens += len(result.events)
        messages.append(ChatMessage("assistant", "".join(answer)))
        answers += 1
        sample = SoakSample(time.perf_counter() - began, rss_bytes(), tokens, answers)
        samples.append(sample)
        if on_sample:
            on_sample(sample)
    return summarise(samples, warmup_fraction=warmup_fraction)


def summarise(samples: list[SoakSample], *, warmup_fraction: float) -> SoakReport:
    if len(samples) < 4:
        raise ValueError("soak too short: fewer than four answers")
    total = samples[-1].elapsed_s
    warm = [s for s in samples if s.elapsed_s >= total * warmup_fraction]
    baseline = warm[0].rss
    last_quarter = [s.rss for s in samples if s.elapsed_s >= total * 0.75] or [samples[-1].rss]
    final = int(sum(last_quarter) / len(last_quarter))
    return SoakReport(tuple(samples), baseline, final, (final - baseline) / baseline)
