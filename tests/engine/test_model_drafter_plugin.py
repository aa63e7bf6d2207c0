"""A drafter that needs a model, added in this file alone (its class and its `@register`):
the mode list and the CLI list it, `auto` prices it from its offer and chooses it, the bench's
replay runs it on a recorded answer, and greedy output stays plain output."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import numpy as np
import pytest

from specchat.bench.hindsight.replay import replay
from specchat.bench.live.trace import record_trace
from specchat.engine.costs.machine import MachineCosts
from specchat.engine.costs.table import CostTable
from specchat.engine.decoding.decoder import SpeculativeDecoder
from specchat.engine.decoding.schedule import AutoPolicy
from specchat.engine.drafting import (
    Draft,
    Drafter,
    Listing,
    LoadedPair,
    Offer,
    mode_info,
    mode_names,
    needs_model,
    parse_mode,
    register,
    unregister,
)
from specchat.engine.llamacpp.model import LlamaModel
from specchat.engine.types import SamplingParams
from specchat.tinymodels import TinyModels
from tests.helpers.engine import CHAT_PROMPTS, run
from tests.helpers.generate_cli import generate_on_tiny

#: Tokens it drafts, at most.
DEPTH = 6
#: A GPU's shape: a pass of a few rows costs about one row, a drafted token a tenth of it.
FLAT = {n: 10.0 + 0.1 * (n - 1) for n in range(1, 65)}


class GreedyModelDrafter(Drafter):
    """Drafts the draft model's greedy tokens and prices them as all kept, for nothing: an
    offer no other drafter's beats, so `auto` takes it wherever it may draft."""

    name = "greedy_test"
    listing = Listing(label="Greedy draft model (test)", needs_model=True, priority=95)

    def __init__(self, model: LlamaModel, pair: LoadedPair) -> None:
        super().__init__()
        self.model = model
        self.pair = pair  # its clock: the replay's is the recorded model's

    @classmethod
    def create(cls, pair: LoadedPair, built: Mapping[str, Drafter]) -> Drafter | None:
        return None if pair.draft is None else cls(pair.draft, pair)

    def offer(
        self, context: Sequence[int], k_cap: int, prices: Sequence[float] | None
    ) -> Offer | None:
        k_max = min(DEPTH, k_cap)
        if k_max <= 0:
            return None
        curve = [1.0 + k for k in range(k_max + 1)]
        return Offer(source=self.name, k_max=k_max, curve=curve, hurdle=0.0, detail="greedy")

    def propose(
        self, context: Sequence[int], k: int, sampling: SamplingParams, rng: np.random.Generator
    ) -> Draft:
        clock = self.pair.clock
        began = clock()
        model = self.model
        cached = model.sync(context)
        if cached == len(context):
            model.truncate(cached - 1)
            cached -= 1
        logits = model.decode(context[cached:], logits="last")[0]
        tokens: list[int] = []
        for i in range(k):
            tokens.append(int(np.argmax(logits)))
            if i + 1 < k:
                logits = model.decode([tokens[-1]], logits="last")[0]
        return Draft(tuple(tokens), None, (clock() - began) * 1000.0, self.name)


@pytest.fixture
def greedy() -> Iterator[type[GreedyModelDrafter]]:
    register(GreedyModelDrafter)
    try:
        yield GreedyModelDrafter
    finally:
        unregister(GreedyModelDrafter.name)


def test_it_is_listed_as_a_mode_that_needs_a_model(greedy: type[Drafter]) -> None:
    assert "greedy_test" in mode_names()
    assert parse_mode("Greedy_Test") == "greedy_test"
    assert mode_info("greedy_test").label == "Greedy draft model (test)"
    assert needs_model("greedy_test")


def _decoder(target: LlamaModel, draft: LlamaModel) -> SpeculativeDecoder:
    target.reset()
    draft.reset()
    auto = AutoPolicy(gpu=True)
    auto.costs.seed(FLAT, draft_token_ms=1.0)
    return SpeculativeDecoder(LoadedPair.of(target, draft, costs=auto.costs), auto=auto)


def test_auto_prices_it_from_its_offer_and_chooses_it(
    tiny_target: LlamaModel, tiny_draft: LlamaModel, greedy: type[Drafter]
) -> None:
    for text in CHAT_PROMPTS:
        # A fresh decoder: no earlier answer to this prompt for the suffix index to copy.
        decoder = _decoder(tiny_target, tiny_draft)
        assert "greedy_test" in decoder.drafters.names()
        prompt = tiny_target.tokenize(text)
        auto = run(decoder, prompt, mode="auto", max_tokens=40)
        plain = run(decoder, prompt, mode="plain", max_tokens=40)
        assert auto.tokens == plain.tokens, text
        chosen = [r.choice for r in auto.rounds if r.drafted]
        ours = [c for c in chosen if c.mode == "greedy_test"]
        # Its offer (every token kept, drafting free) is the best wherever no long copy is.
        assert len(ours) > len(chosen) / 2, [c.reason for c in chosen]
        assert all("greedy" in c.reason and "needs 1.00×" in c.reason for c in ours)
        fixed = run(decoder, prompt, mode="greedy_test", k=3, max_tokens=40)
        assert fixed.tokens == plain.tokens, text


def test_the_bench_replays_it_on_a_recorded_answer(
    tiny_target: LlamaModel, tiny_draft: LlamaModel, greedy: type[Drafter]
) -> None:
    decoder = _decoder(tiny_target, tiny_draft)
    prompt = tiny_target.tokenize(CHAT_PROMPTS[0])
    answer = run(decoder, prompt, mode="plain", max_tokens=40).tokens
    trace = record_trace("p", prompt, answer, draft_model=tiny_draft)
    costs = MachineCosts(CostTable(gpu=True))
    costs.seed(FLAT, draft_token_ms=1.0)
    (result,) = replay([trace], costs)
    # Replayed through its own offer and its own proposals, on the draft model as recorded
    # (the close tiny draft agrees with the target often): its rounds keep tokens.
    assert result.rounds.get("greedy_test", 0) > 0, result.rounds
    assert result.kept["greedy_test"] > 0
    assert result.speedup > 1.0


def test_specchat_generate_runs_it(
    tiny_models: TinyModels, greedy: type[Drafter], capsys: pytest.CaptureFixture[str]
) -> None:
    plain, _ = generate_on_tiny(tiny_models, "plain", capsys)
    out, err = generate_on_tiny(tiny_models, "greedy_test", capsys)
    assert out == plain
    assert "drafted 0," not in err and "drafted " in err
