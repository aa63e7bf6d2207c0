"""Auto pays for the cheapest pass holding its draft, and never measures inside an answer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from specchat.engine.decoding.decoder import SpeculativeDecoder
from specchat.engine.drafting.base import LoadedPair
from specchat.engine.llamacpp.model import LlamaModel
from specchat.engine.types import Controls, GenerationRequest, SamplingParams
from specchat.tinymodels import TinyModels
from tests.helpers.engine import CHAT_PROMPTS


def _grouped(n: int) -> float:
    """A CPU-like table where a size that fills the kernels' row groups is cheap (as with
    llama.cpp's repacked CPU kernels): a pass of 16 costs less than any from 5 to 15, a pass
    of 32 less than any from 21 to 31."""
    rows = {16: 4, 32: 11}.get(n, n)
    return round(10.0 * (1.0 + 0.3 * (rows - 1)), 3)


JAGGED = {n: _grouped(n) for n in range(1, 65)}


#: Texts after which the tiny target's answers repeat short stretches of themselves, so
#: lookup proposes short copies (a pass holding one is often dearer than a pass of 16).
TEXTS = ("abcde" * 6, "hello world", "12345 12345 12345", "x", "the cat sat on the mat", "aaaa")


@pytest.fixture(params=[None, "draft_same"], ids=["lookup", "lookup+draft"])
def pinned(tiny_models: TinyModels, request: pytest.FixtureRequest) -> Iterator[SpeculativeDecoder]:
    """A decoder whose auto policy prices passes with JAGGED, learning no costs."""
    with LlamaModel(tiny_models.target, n_ctx=1024) as target:
        draft = None
        if request.param is not None:
            draft = LlamaModel(getattr(tiny_models, request.param), n_ctx=1024)
        decoder = SpeculativeDecoder(LoadedPair.of(target, draft))
        auto = decoder.auto
        auto.costs.seed(JAGGED)
        auto.costs.observe_batch = lambda *args, **kwargs: None  # type: ignore[method-assign]
        if draft is not None:
            drafter = decoder.drafters["draft"]
            drafter.draft_token_ms = 2.0  # type: ignore[attr-defined]
            drafter.observe_draft = lambda *args, **kwargs: None  # type: ignore[attr-defined]
        yield decoder
        if draft is not None:
            draft.close()


def test_no_pass_is_sized_where_a_larger_one_costs_less(pinned: SpeculativeDecoder) -> None:
    sizes = []
    for text in TEXTS:
        prompt = pinned.target.tokenize(text)
        request = GenerationRequest(tuple(prompt), 96, Controls("auto", 4, SamplingParams()))
        emitted = 0
        for result in pinned.generate(request):
            if result.drafted:
                rows = result.drafted + 1
                # The decoder may not draft past the answer's end (k_cap).
                top = min(64, 96 - emitted)
                cheaper = [m for m in range(rows + 1, top + 1) if JAGGED[m] <= JAGGED[rows]]
                assert not cheaper, f"a pass of {rows} where {cheaper[0]} costs no more"
                sizes.append(rows)
            emitted += len(result.events)
    assert sizes, "auto never drafted: the test checked nothing"
    assert 16 in sizes


def test_an_answer_times_nothing_but_its_own_rounds(tiny_models: TinyModels) -> None:
    with (
        LlamaModel(tiny_models.target, n_ctx=1024) as target,
        LlamaModel(tiny_models.draft_close, n_ctx=1024) as draft,
    ):
        decoder = SpeculativeDecoder(LoadedPair.of(target, draft))  # nothing measured yet
        passes: list[int] = []
        real_decode = target.decode

        def counting(tokens, **kwargs):  # type: ignore[no-untyped-def]
            passes.append(len(tokens))
            return real_decode(tokens, **kwargs)

        target.decode = counting  # type: ignore[method-assign]
        prompt = target.tokenize(CHAT_PROMPTS[1])
        request = GenerationRequest(tuple(prompt), 40, Controls("auto", 4, SamplingParams()))
        rounds = [r for r in decoder.generate(request) if r.drafted or r.events]
        # One pass for the prompt, then exactly one per round, of the round's size: no
        # calibration, no measurement of the cost table inside the answer.
        assert passes == [len(prompt) - 1, *(r.drafted + 1 for r in rounds)]
        assert not any(decoder.auto.costs.target.samples.values())
