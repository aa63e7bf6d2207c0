"""Runs the shipped bench prompts through `auto` with pinned costs, recording each decision."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from specchat.bench.prompts import load_prompts
from specchat.engine.decoding.pricer import RoundContext
from specchat.engine.drafting import DraftModelDrafter, Offer
from specchat.engine.session import ChatEngine
from specchat.engine.templates.chat_template import ChatMessage
from specchat.engine.types import Controls, GenerationRequest, PolicyChoice, SamplingParams

#: Answer length per prompt: long enough for lookup matches to build up and probes to fire.
MAX_TOKENS = 96


@dataclass(frozen=True)
class PinnedCosts:
    """A fixed cost table standing in for timings, so choices depend on text alone.

    Attributes:
        name: what the table models.
        batch_ms: target pass time for n = 1 … 64 tokens.
        draft_token_ms: draft-model time per token.
        catchup_token_ms: draft-model time per token of a catch-up (text it has not seen,
            evaluated in one pass).
    """

    name: str
    batch_ms: dict[int, float]
    draft_token_ms: float
    catchup_token_ms: float


def _interpolated(points: dict[int, float]) -> dict[int, float]:
    sizes = sorted(points)
    table = {}
    for n in range(1, 65):
        lo = max(s for s in sizes if s <= n)
        hi = min(s for s in sizes if s >= n)
        share = 0.0 if lo == hi else (n - lo) / (hi - lo)
        t = points[lo] + (points[hi] - points[lo]) * share
        table[n] = round(t, 3)
    return table


#: A 2-core CPU (the 1.5B target's measured pass cost ratios, one token ≈ 28 ms): big batches
#: are dear, so the draft model rarely pays and long lookup copies do.
CPU = PinnedCosts(
    "cpu",
    _interpolated(
        {1: 28.0, 2: 45.6, 4: 73.1, 8: 127.7, 15: 191.0, 16: 191.0, 32: 257.9, 64: 490.0}
    ),
    draft_token_ms=11.0,
    catchup_token_ms=3.3,
)
#: A GPU: extra rows nearly free and a cheap draft model, so the draft model pays; it
#: evaluates unseen text in one pass at a fraction of a drafted token's time.
GPU = PinnedCosts(
    "gpu",
    {n: round(10.0 + 0.1 * (n - 1), 3) for n in range(1, 65)},
    draft_token_ms=1.5,
    catchup_token_ms=0.1,
)
TABLES = (CPU, GPU)


def pin(engine: ChatEngine, costs: PinnedCosts) -> None:
    """Replace the measured costs with `costs` (the target's in the auto policy, the draft
    model's in its drafter), and stop both learning costs."""
    auto = engine.decoder.auto
    auto.costs.seed(costs.batch_ms)
    auto.costs.observe_batch = lambda *args, **kwargs: None  # type: ignore[method-assign]
    drafter = engine.decoder.drafters["draft"]
    assert isinstance(drafter, DraftModelDrafter)
    drafter.draft_token_ms = costs.draft_token_ms
    drafter.catchup_token_ms = costs.catchup_token_ms
    for method in ("observe_draft", "observe_catchup"):
        setattr(drafter, method, lambda *args, **kwargs: None)


@dataclass(frozen=True)
class Decision:
    """One round's choice by `auto`, with what it chose from.

    Attributes:
        offers: the offer of every drafter that offered.
        prices: the target's price list the round was priced with.
        choice: what the policy chose.
        budget: the tokens the answer could still write (what a one-off is spread over).
    """

    offers: tuple[Offer, ...]
    prices: tuple[float, ...]
    choice: PolicyChoice
    budget: int | None = None


def decisions(target: Path, draft: Path, costs: PinnedCosts) -> list[Decision]:
    """Every round's decision over the shipped prompts (one decoder across all of them)."""
    engine = ChatEngine.load(target, draft, n_ctx=2048)
    try:
        pin(engine, costs)
        auto = engine.decoder.auto
        made: list[Decision] = []
        choose = auto.choose

        def recording(
            offers: Sequence[Offer],
            prices: Sequence[float] | None = None,
            at: RoundContext | None = None,
        ) -> PolicyChoice:
            choice = choose(offers, prices, at)
            budget = None if at is None else at.budget
            made.append(Decision(tuple(offers), tuple(prices or ()), choice, budget))
            return choice

        auto.choose = recording  # type: ignore[method-assign]
        for prompt in load_prompts():
            messages = [ChatMessage(m["role"], m["content"]) for m in prompt.messages()]
            tokens = engine.prepare(messages, max_tokens=MAX_TOKENS).tokens
            request = GenerationRequest(
                prompt_tokens=tokens,
                max_tokens=MAX_TOKENS,
                controls=Controls("auto", 4, SamplingParams(temperature=0.0)),
            )
            for _ in engine.decoder.generate(request):
                pass
        return made
    finally:
        engine.close()
