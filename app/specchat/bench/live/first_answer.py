"""The first answer after a load: its time to first token in plain and in auto, each on a pair
loaded fresh with an empty cost store of its own, as a new user's first answer is."""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from specchat.bench.prompts import BenchPrompt
from specchat.engine.costs.store import CostStore
from specchat.engine.drafting.registry import AUTO, PLAIN
from specchat.engine.session import ChatEngine
from specchat.engine.templates.chat_template import ChatMessage
from specchat.engine.types import Controls, GenerationRequest, SamplingParams

#: The modes compared, in the order of even repeats (odd ones run them the other way round,
#: so neither always loads first).
MODES = (PLAIN, AUTO)

#: Answer length: only the first token is timed, the rest shows the answer went on.
MAX_TOKENS = 4

#: Auto's first-answer time to first token may be at most this many times plain's.
GOAL = 1.10

#: Loads a pair fresh with its cost tables kept in the given store.
Loader = Callable[[CostStore], ChatEngine]


@dataclass(frozen=True)
class FirstAnswer:
    """One first answer after a fresh load.

    Attributes:
        mode: the drafting mode it ran in.
        repeat: repetition index.
        prompt: the prompt's id.
        prompt_tokens: its length.
        load_s: time to load the pair.
        ttft_ms: wall time from the generation request to the first token.
        total_ms: wall time from the request to the answer's end.
        tokens: tokens answered.
        store: the cost store's folder (a temporary one, gone after the answer).
        stored_tables: cost tables in that folder when the answer began.
        measured_sizes: pass sizes the target's cost table held when the answer began.
    """

    mode: str
    repeat: int
    prompt: str
    prompt_tokens: int
    load_s: float
    ttft_ms: float
    total_ms: float
    tokens: int
    store: str
    stored_tables: int
    measured_sizes: int

    def to_json(self) -> dict[str, object]:
        return {
            "mode": self.mode,
            "repeat": self.repeat,
            "prompt": self.prompt,
            "prompt_tokens": self.prompt_tokens,
            "load_s": round(self.load_s, 3),
            "ttft_ms": round(self.ttft_ms, 3),
            "total_ms": round(self.total_ms, 3),
            "tokens": self.tokens,
            "stored_tables": self.stored_tables,
            "measured_sizes": self.measured_sizes,
        }


def plan(repeat: int) -> list[tuple[int, str]]:
    """(repeat, mode) in run order: the modes alternate, and swap places every repeat."""
    return [(r, mode) for r in range(repeat) for mode in (MODES if r % 2 == 0 else MODES[::-1])]


def first_answer(
    load: Loader, prompt: BenchPrompt, mode: str, *, repeat: int = 0, max_tokens: int = MAX_TOKENS
) -> FirstAnswer:
    """Load the pair with an empty private cost store, answer `prompt` once in `mode` and
    time its first token; the pair is closed after."""
    with tempfile.TemporaryDirectory(prefix="specchat-first-answer-") as folder:
        began = time.perf_counter()
        engine = load(CostStore(Path(folder)))
        load_s = time.perf_counter() - began
        try:
            tokens = engine.prepare(
                [ChatMessage(m["role"], m["content"]) for m in prompt.messages()],
                max_tokens=max_tokens,
            ).tokens
            stored = len(list(Path(folder).glob("*.json")))
            measured = len(engine.costs.target.pass_ms)
            controls = Controls(mode, 0, SamplingParams(temperature=0.0))
            request = GenerationRequest(tokens, max_tokens, controls)
            first: float | None = None
            emitted = 0
            start = end = time.perf_counter()
            for result in engine.generate(request):
                end = time.perf_counter()
                if first is None and result.events:
                    first = end
                emitted += len(result.events)
        finally:
            engine.close()
    return FirstAnswer(
        mode=mode,
        repeat=repeat,
        prompt=prompt.id,
        prompt_tokens=len(tokens),
        load_s=load_s,
        ttft_ms=((end if first is None else first) - start) * 1000.0,
        total_ms=(end - start) * 1000.0,
        tokens=emitted,
        store=folder,
        stored_tables=stored,
        measured_sizes=measured,
    )


def measure(
    load: Loader,
    prompt: BenchPrompt,
    *,
    repeat: int,
    max_tokens: int = MAX_TOKENS,
    progress: Callable[[int, int, str], None] | None = None,
) -> tuple[FirstAnswer, ...]:
    """Every mode's first answer after a fresh load, `repeat` times, alternating;
    `progress(done, total, label)` follows each."""
    order = plan(repeat)
    answers: list[FirstAnswer] = []
    for r, mode in order:
        answers.append(first_answer(load, prompt, mode, repeat=r, max_tokens=max_tokens))
        if progress is not None:
            label = f"first answer · {mode} · repeat {r} · {answers[-1].ttft_ms:.0f} ms"
            progress(len(answers), len(order), label)
    return tuple(answers)


def summary(answers: Sequence[FirstAnswer]) -> dict[str, object] | None:
    """Per mode the median time to first token, auto's over plain's, and the goal."""
    if not answers:
        return None
    medians = {
        mode: statistics.median(a.ttft_ms for a in answers if a.mode == mode)
        for mode in MODES
        if any(a.mode == mode for a in answers)
    }
    ratio = (
        medians[AUTO] / medians[PLAIN]
        if AUTO in medians and PLAIN in medians and medians[PLAIN] > 0
        else None
    )
    return {
        "prompt": answers[0].prompt,
        "prompt_tokens": answers[0].prompt_tokens,
        "median_ttft_ms": {mode: round(ms, 3) for mode, ms in medians.items()},
        "median_load_s": round(statistics.median(a.load_s for a in answers), 3),
        "auto_over_plain": None if ratio is None else round(ratio, 4),
        "goal": GOAL,
        "passed": None if ratio is None else ratio <= GOAL,
        "answers": [a.to_json() for a in answers],
    }


def goal_line(first: dict[str, object]) -> tuple[str, bool | None, str]:
    """(name, passed, detail) of the first-answer goal."""
    medians = first["median_ttft_ms"]
    assert isinstance(medians, dict)
    ratio = first["auto_over_plain"]
    detail = ", ".join(f"{mode} {ms:.0f} ms" for mode, ms in medians.items())
    if ratio is not None:
        detail = f"{ratio:.3f}× ({detail}; medians over fresh loads)"
    passed = first["passed"]
    assert passed is None or isinstance(passed, bool)
    return (
        f"auto's first answer after a load: time to first token ≤ {GOAL:.2f}× plain's",
        passed,
        detail,
    )
