"""A copy of the answer's own earlier text is priced and learnt apart from a copy of given text."""

from __future__ import annotations

import pytest

from specchat.engine.drafting import CopyAcceptance, Draft, Outcome, PromptLookupDrafter
from specchat.engine.drafting.base import Answer
from specchat.engine.drafting.copies.copying import CopyDrafter
from specchat.engine.drafting.suffix.suffix_drafter import SuffixDrafter

GIVEN = list(range(100, 120))  # a stretch of text with no repeats in it
NO_DRAFT = Draft((), None, 0.0, "plain")


def _curve(drafter: CopyDrafter, prompt: list[int], answer: list[int]) -> list[float]:
    drafter.begin(Answer(prompt=prompt))
    context = [*prompt, *answer]
    offer = drafter.offer(context, 8, None)
    assert offer is not None
    assert offer.detail.startswith("4-token match")
    return list(offer.curve)


@pytest.mark.parametrize("make", [PromptLookupDrafter, SuffixDrafter])
def test_a_copy_of_the_answer_itself_is_priced_below_a_copy_of_given_text(make) -> None:  # type: ignore[no-untyped-def]
    # The same 4-token match and the same continuation: once in the prompt the answer
    # quotes, once in the answer's own first lines, which it now starts to repeat.
    given = _curve(make(), GIVEN, GIVEN[:4])
    own = _curve(make(), [1, 2, 3], [*GIVEN, *GIVEN[:4]])
    assert len(own) == len(given)
    assert all(o < g for o, g in zip(own[1:], given[1:], strict=True))


def test_own_copies_learn_apart_from_copies_of_given_text() -> None:
    acceptance = CopyAcceptance()
    acceptance.restart(text_len=10)
    assert acceptance.own(10) and not acceptance.own(9)
    given, own = acceptance.estimate(4).alpha, acceptance.estimate(4, own=True).alpha
    text = list(range(10))
    for _ in range(6):  # the answer repeats itself and then changes a word, again and again
        acceptance.note(len(text), (1, 1), match_len=4, own=True)
        text.append(2)
        acceptance.learn(text, margin=None)
    assert acceptance.estimate(4, own=True).alpha < own
    assert acceptance.estimate(4).alpha == given


def test_a_drafter_scores_its_own_copies_as_own() -> None:
    lookup = PromptLookupDrafter()
    prompt = [1, 2, 3]
    lookup.begin(Answer(prompt=prompt))
    text = [*prompt, *GIVEN, *GIVEN[:4]]
    own_before = lookup.copies.estimate(4, own=True).alpha
    given_before = lookup.copies.estimate(4).alpha
    assert lookup.offer(text, 8, None) is not None
    # The answer goes on differently from its earlier lines: the copy is refused.
    lookup.observe(Outcome([*text, 7], NO_DRAFT, 0))
    assert lookup.copies.estimate(4, own=True).alpha < own_before
    assert lookup.copies.estimate(4).alpha == given_before
