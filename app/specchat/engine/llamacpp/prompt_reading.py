"""Reading a prompt in chunks: progress with an estimate between chunks, and a place to stop."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from specchat.engine.llamacpp.model import LlamaModel
from specchat.engine.llamacpp.recurrent_state import prompt_tail

#: Tokens evaluated per step: on a CPU about a second's work, so Stop waits at most that.
PROMPT_CHUNK = 64
#: Prompts with fewer tokens left to read are read in one go, without progress reports.
REPORT_FROM = 2 * PROMPT_CHUNK


@dataclass(frozen=True)
class PromptReading:
    """How far reading a prompt has come.

    Attributes:
        done: tokens evaluated so far (of those not already cached).
        total: tokens to evaluate.
        restored: tokens taken from a kept state instead of being read.
        eta_s: seconds left by the measured prompt rate; None before any rate is known.
    """

    done: int
    total: int
    restored: int = 0
    eta_s: float | None = None


class PromptRate:
    """Tokens per second of prompt reading on this machine, from the chunks read so far.

    Attributes:
        tokens_per_s: the latest estimate, or None before the first chunk.
    """

    def __init__(self) -> None:
        self.tokens_per_s: float | None = None

    def observe(self, tokens: int, seconds: float) -> None:
        if seconds <= 0:
            return
        rate = tokens / seconds
        # Smoothed: one chunk slowed by another process should not swing the estimate.
        previous = self.tokens_per_s
        self.tokens_per_s = rate if previous is None else 0.6 * previous + 0.4 * rate

    def eta(self, tokens_left: int) -> float | None:
        return None if not self.tokens_per_s else tokens_left / self.tokens_per_s


def read_prompt(
    model: LlamaModel,
    tokens: Sequence[int],
    *,
    rate: PromptRate,
    restored: int = 0,
    chunk: int = PROMPT_CHUNK,
) -> Iterator[PromptReading]:
    """Make `model`'s cache hold `tokens`, one chunk per step, yielding progress before the
    first chunk and after each; a short prompt is read at once and reported done. The caller
    may stop between steps (close the iterator): the cache then holds a prefix of `tokens`,
    which the next answer reuses."""
    cached = model.sync(tokens)
    total = len(tokens) - cached
    # A recurrent model keeps its state a few tokens before the end (see prompt_tail).
    tail = prompt_tail(model.rollback, len(tokens), cached)
    if total < REPORT_FROM:
        if tail > cached:
            model.decode(tokens[cached:tail], logits="none")
        model.mark_prompt()
        if len(tokens) > max(cached, tail):
            model.decode(tokens[max(cached, tail) :], logits="none")
        yield PromptReading(total, total, restored, 0.0)
        return
    done = 0
    yield PromptReading(0, total, restored, rate.eta(total))
    while done < total:
        end = cached + done + chunk
        if cached + done < tail < end:
            end = tail
        piece = tokens[cached + done : end]
        began = time.perf_counter()
        model.decode(piece, logits="none")
        rate.observe(len(piece), time.perf_counter() - began)
        done += len(piece)
        if cached + done == tail:
            model.mark_prompt()
        yield PromptReading(done, total, restored, rate.eta(total - done))
