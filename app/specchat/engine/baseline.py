"""The plain-decoding rate speed-ups are measured against: after a load, then during answers."""

from __future__ import annotations

import logging
import statistics
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from specchat.engine.drafting.registry import PLAIN
from specchat.engine.templates.chat_template import ChatMessage
from specchat.engine.types import Controls, GenerationRequest, RoundResult, TokenKind

if TYPE_CHECKING:
    from specchat.engine.session import ChatEngine

log = logging.getLogger(__name__)

#: Plain rounds measured during answers that the running baseline keeps (most recent).
BASELINE_WINDOW = 64
#: Plain tokens timed right after a load to measure the plain rate speed-ups refer to.
CALIBRATION_TOKENS = 8
#: Plain tokens generated first and not timed: the first passes after a load fault the
#: memory-mapped weights in from disk and would make plain look slow (speed-ups inflated).
CALIBRATION_WARMUP = 3


@dataclass(frozen=True)
class PlainBaseline:
    """The measured plain-decoding rate that speed-ups are relative to.

    Attributes:
        tokens_per_s: plain tokens per second on this machine with this target.
        source: how it was measured, for people ("8 plain tokens after loading").
        samples: plain tokens the figure rests on.
    """

    tokens_per_s: float
    source: str
    samples: int


@dataclass
class BaselineMeter:
    """Measures plain decoding: after a load, then from PLAIN rounds the policy runs."""

    calibrated: PlainBaseline | None = None
    recent: list[float] = field(default_factory=list)  # seconds per plain token

    def observe(self, seconds: float) -> None:
        self.recent.append(seconds)
        del self.recent[:-BASELINE_WINDOW]

    def current(self) -> PlainBaseline | None:
        # A handful of plain rounds inside answers is closer to what drafting competes with
        # (same context lengths) than the calibration; before that, the calibration stands.
        if len(self.recent) >= 4:
            rate = robust_rate(self.recent)
            return PlainBaseline(
                rate, f"median of {len(self.recent)} plain rounds during answers", len(self.recent)
            )
        return self.calibrated


class PlainRounds:
    """One answer's plain rounds timed into a meter, the same way for every answer (the
    window's, the API's): each from the previous round's end, so a plain token is charged
    the loop overhead a speculative round is and the speed-up is not flattered.

    Attributes:
        meter: where the times go.
    """

    def __init__(self, meter: BaselineMeter) -> None:
        self.meter = meter
        self._previous = 0.0

    def observe(self, result: RoundResult) -> None:
        """A round of the answer has just ended."""
        now = time.perf_counter()
        plain = result.drafted == 0 and any(e.kind == TokenKind.PLAIN for e in result.events)
        # The first round's wall time also holds the prompt's evaluation (and auto's one-off
        # calibration, seconds on a CPU): only later plain rounds measure plain decoding.
        if plain and result.index > 0 and self._previous:
            self.meter.observe(now - self._previous)
        self._previous = now


def robust_rate(seconds: list[float]) -> float:
    """Tokens per second from per-token times: the median, so one slow pass (another
    process, a page fault) does not move the baseline every speed-up is divided by."""
    return 1.0 / statistics.median(seconds)


def calibrate(engine: ChatEngine, *, cancel: threading.Event) -> PlainBaseline | None:
    """Time a few plain tokens, so the first answer's speed-up is already a measurement."""
    try:
        prompt = engine.prompt_tokens.tokens([ChatMessage("user", "Hello!")])
        request = GenerationRequest(
            tuple(prompt),
            max_tokens=CALIBRATION_WARMUP + CALIBRATION_TOKENS + 1,
            controls=Controls(PLAIN, 0),
        )
        rounds = engine.generate(request, cancel=cancel)
        times: list[float] = []
        previous = time.perf_counter()
        for index, result in enumerate(rounds):
            now = time.perf_counter()
            # Round 0 also evaluates the prompt, and the first rounds warm up: untimed.
            if index > CALIBRATION_WARMUP and result.events:
                times.append(now - previous)
            previous = now
    except Exception:
        log.info("plain calibration failed", exc_info=True)
        return None
    if not times:
        return None
    return PlainBaseline(
        robust_rate(times),
        f"median of {len(times)} plain tokens timed after loading",
        len(times),
    )
