"""No draft runs past the token that ends the answer: nothing after it can be kept.

A copy of an earlier turn's ending (a regenerate, a code block closed the way the user's
was) otherwise runs on through the chat format into the next message, and `auto` prices,
and pays for, a pass of rows that can only be thrown away.
"""

from __future__ import annotations

import numpy as np
import pytest

from specchat.engine.decoding.decoder import SpeculativeDecoder
from specchat.engine.drafting import DraftModelDrafter, PromptLookupDrafter, SuffixDrafter
from specchat.engine.drafting.base import Answer, Drafter, EndTokens, through_end
from specchat.engine.llamacpp.model import LlamaModel
from specchat.engine.types import SamplingParams

END = 50  # the answer's end in these texts
SOURCE = list(range(100, 120))
# An earlier turn: SOURCE, the end of that answer, then the chat format's next message.
EARLIER = [*SOURCE, END, 60, 61, 62, 63, 64, 65, 66]
# The new answer has copied the earlier one's first twelve tokens.
CONTEXT = [*EARLIER, 7, *SOURCE[:12]]


def _ends(token: int) -> bool:
    return token == END


def test_through_end_keeps_the_end_token_and_nothing_after() -> None:
    assert through_end([1, 2, END, 3, 4], _ends) == (1, 2, END)
    assert through_end([1, 2, 3], _ends) == (1, 2, 3)
    assert through_end([END], _ends) == (END,)
    assert through_end([], _ends) == ()


@pytest.mark.parametrize("make", [PromptLookupDrafter, SuffixDrafter])
def test_a_copy_and_its_branches_stop_at_the_answer_end(make: type[Drafter]) -> None:
    drafter = make()
    drafter.begin(Answer(prompt=CONTEXT[:-12]))
    # Without an end test the copy runs on into the next message...
    offer = drafter.offer(CONTEXT, 64, None)
    assert offer is not None and offer.k_max > len(SOURCE) - 12 + 1
    drafter._ends_answer = _ends
    drafter.begin(Answer(prompt=CONTEXT[:-12]))
    offer = drafter.offer(CONTEXT, 64, None)
    # ... with it, auto is offered (and prices) the copy up to the end token only.
    assert offer is not None and offer.k_max == len(SOURCE) - 12 + 1
    draft = drafter.propose(CONTEXT, 64, SamplingParams(), np.random.default_rng(0))
    assert draft.tokens == (*SOURCE[12:], END)
    assert all(END not in branch[:-1] for branch in draft.branches)


def test_the_draft_model_stops_drafting_at_the_answer_end(tiny_models) -> None:  # type: ignore[no-untyped-def]
    model = LlamaModel(tiny_models.draft_close, n_ctx=256)
    try:
        context = model.tokenize("the cat sat on the mat and", add_special=False)
        rng = np.random.default_rng(0)
        drafter = DraftModelDrafter(model, min_confidence=0.0)
        full = drafter.propose(context, 6, SamplingParams(), rng).tokens
        assert len(full) == 6
        drafter._ends_answer = lambda token: token == full[2]
        cut = drafter.propose(context, 6, SamplingParams(), rng).tokens
        assert cut == full[: full.index(full[2]) + 1]
    finally:
        model.close()


def test_the_drafters_of_a_pair_know_the_targets_end_tokens(
    decoder: SpeculativeDecoder,
) -> None:
    target = decoder.target
    eos = target.eos
    assert target.is_eog(eos)
    word = target.tokenize("cat", add_special=False)[0]
    for drafter in decoder.drafters:
        assert drafter._ends_answer(eos), drafter.name
        assert not drafter._ends_answer(word), drafter.name
    # Through the decoder's own drafters: a copy of an earlier turn stops at its end.
    text = target.tokenize("the cat sat on the mat and the dog", add_special=False)
    earlier = [*text, eos, *target.tokenize(" then more text follows", add_special=False)]
    context = [*earlier, *text[:4]]
    lookup = decoder.drafters["lookup"]
    lookup.begin(Answer(prompt=earlier))
    offer = lookup.offer(context, 64, None)
    assert offer is not None and offer.k_max == len(text) - 4 + 1


def test_end_tokens_asks_each_token_once() -> None:
    asked: list[int] = []

    def is_end(token: int) -> bool:
        asked.append(token)
        return token == END

    ends = EndTokens(is_end)
    assert [ends(t) for t in (1, END, 1, END, 2)] == [False, True, False, True, False]
    assert asked == [1, END, 2]
