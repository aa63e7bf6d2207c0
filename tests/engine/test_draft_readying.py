"""Under `auto`, the draft model reads a follow-up's prompt before the first token only where
the first round would use it (paying for that read, and no copy or prediction chosen over
it): otherwise the first token waits for nothing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pytest

from specchat.engine.decoding.decoder import SpeculativeDecoder
from specchat.engine.decoding.schedule import AutoPolicy
from specchat.engine.drafting.base import LoadedPair
from specchat.engine.drafting.draft_model.draft_model_drafter import DraftModelDrafter
from specchat.engine.llamacpp.model import LlamaModel
from specchat.engine.types import Controls, GenerationRequest, RoundResult
from tests.helpers.engine import CHAT_PROMPTS, run

# A GPU's shape: a pass of a few rows costs about one row, a drafted token a tenth of it.
FLAT_COSTS = {1: 20.0, 2: 21.0, 4: 22.0, 8: 24.0, 16: 30.0, 32: 40.0, 64: 60.0}
DRAFT_TOKEN_MS = 2.0
# A 2-core CPU's: a pass of n rows costs nearly n one-row passes.
CPU_COSTS = {1: 36.0, 2: 70.0, 4: 140.0, 8: 280.0, 16: 560.0, 32: 1100.0, 64: 2200.0}


class _Counted:
    """Counts the tokens a model evaluates (its `decode` calls), passing them through."""

    def __init__(self, model: LlamaModel, monkeypatch: pytest.MonkeyPatch) -> None:
        self.tokens = 0
        decode = model.decode

        def counted(tokens: Sequence[int], *, logits: str = "last") -> np.ndarray:
            self.tokens += len(tokens)
            return decode(tokens, logits=logits)

        monkeypatch.setattr(model, "decode", counted)


def _decoder(target: LlamaModel, draft: LlamaModel, costs: dict[int, float]) -> SpeculativeDecoder:
    target.reset()
    draft.reset()
    auto = AutoPolicy()
    auto.costs.seed(costs, draft_token_ms=DRAFT_TOKEN_MS)
    return SpeculativeDecoder(LoadedPair.of(target, draft, costs=auto.costs), auto=auto)


def _follow_up(decoder: SpeculativeDecoder) -> list[int]:
    """A first request answered (plain, so nothing is learnt about costs), then a follow-up
    repeating its prompt and answer with a long new message: the draft model never read it."""
    first = decoder.target.tokenize(CHAT_PROMPTS[0] * 6)
    answer = run(decoder, first, mode="plain", max_tokens=24).tokens
    more = decoder.target.tokenize(CHAT_PROMPTS[1] * 12, add_special=False)
    prompt = [*first, *answer, *more]
    assert 400 < len(prompt) < 900
    return prompt


def _fresh_follow_up(decoder: SpeculativeDecoder) -> list[int]:
    """The follow-up, ending in words said nowhere before: no copy of the chat is chosen for
    its first round (the follow-up alone ends where its repeated message matches 500 tokens
    back, and the first round copies that)."""
    fresh_end = decoder.target.tokenize("Rivers and stones, a quiet poem", add_special=False)
    return [*_follow_up(decoder), *fresh_end]


def _first_round(decoder: SpeculativeDecoder, prompt: Sequence[int]) -> RoundResult:
    """The follow-up's first round under auto (its first token)."""
    return next(decoder.generate(GenerationRequest(tuple(prompt), 16, Controls("auto", 4))))


def test_a_draft_model_that_cannot_pay_reads_nothing_before_the_first_token(
    tiny_target: LlamaModel, tiny_draft: LlamaModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A CPU's passes: it loses in step. Flat passes with a read as dear as a target pass
    # a token: it wins in step, yet even at perfect acceptance never repays the prompt read.
    for costs, read_ms in ((CPU_COSTS, None), (FLAT_COSTS, 20.0)):
        decoder = _decoder(tiny_target, tiny_draft, costs)
        prompt = _follow_up(decoder)
        drafter = decoder.drafters["draft"]
        assert isinstance(drafter, DraftModelDrafter)
        drafter.catchup_token_ms = read_ms
        if read_ms is not None:
            in_step = drafter.offer(prompt, 16, decoder.auto.prices())
            assert in_step is not None  # in step (nothing to read), it would be readied:
            assert decoder.auto.worth_readying(replace(in_step, extra_ms=0.0))
        counted = _Counted(tiny_draft, monkeypatch)
        first = _first_round(decoder, prompt)
        assert first.choice.mode != "draft", first.choice
        assert counted.tokens == 0
        monkeypatch.undo()


def test_a_draft_model_that_pays_is_still_readied_before_the_first_token(
    tiny_target: LlamaModel, tiny_draft: LlamaModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoder = _decoder(tiny_target, tiny_draft, FLAT_COSTS)
    prompt = _fresh_follow_up(decoder)
    # A catch-up read in one batch on a GPU: a few milliseconds for the whole prompt.
    drafter = decoder.drafters["draft"]
    assert isinstance(drafter, DraftModelDrafter)
    drafter.catchup_token_ms = 0.001
    counted = _Counted(tiny_draft, monkeypatch)
    readied: list[int] = []
    ready = drafter.ready

    def noted(prompt: Sequence[int]) -> None:
        readied.append(len(prompt))
        ready(prompt)

    monkeypatch.setattr(drafter, "ready", noted)
    first = _first_round(decoder, prompt)
    assert first.choice.mode == "draft", first.choice
    assert readied == [len(prompt)]  # readied before the first round, not caught up in it
    assert counted.tokens >= len(prompt) - 1


def test_a_draft_model_a_prediction_would_outrun_reads_nothing_before_the_first_token(
    tiny_target: LlamaModel, tiny_draft: LlamaModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Readied only where the first round would use it: with the request's prediction (a
    whole-file edit's Predicted Output) the first round copies it, and the draft model's
    prompt read would delay the first token for nothing (a 400-token prompt: 3 s on a
    2-core CPU). Without the prediction the same draft model is readied (the test above)."""
    answering = _decoder(tiny_target, tiny_draft, FLAT_COSTS)
    expected = run(answering, _fresh_follow_up(answering), mode="plain", max_tokens=16).tokens
    decoder = _decoder(tiny_target, tiny_draft, FLAT_COSTS)  # one that has not seen that answer
    prompt = _fresh_follow_up(decoder)
    drafter = decoder.drafters["draft"]
    assert isinstance(drafter, DraftModelDrafter)
    drafter.catchup_token_ms = 0.001  # as above: a read that costs nothing
    readied: list[int] = []
    monkeypatch.setattr(drafter, "ready", lambda prompt: readied.append(len(prompt)))
    request = GenerationRequest(tuple(prompt), 16, Controls("auto", 4), prediction=expected)
    first = next(decoder.generate(request))
    assert first.choice.mode == "prediction", first.choice
    assert readied == []
