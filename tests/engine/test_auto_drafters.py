"""Auto asks each round only the drafters no other one present subsumes."""

from __future__ import annotations

import re

from specchat.engine.decoding.decoder import SpeculativeDecoder
from specchat.engine.drafting import (
    ChainDrafter,
    Draft,
    Drafter,
    Outcome,
    PromptLookupDrafter,
    SuffixDrafter,
    auto_drafters,
)
from specchat.engine.drafting.base import Answer
from tests.helpers.engine import CHAT_PROMPTS, run


def _names(drafters: tuple[Drafter, ...]) -> tuple[str, ...]:
    return tuple(drafter.name for drafter in drafters)


def test_the_suffix_index_stands_in_for_prompt_lookup() -> None:
    lookup, suffix = PromptLookupDrafter(), SuffixDrafter()
    assert _names(auto_drafters([suffix, lookup])) == ("suffix",)
    assert _names(auto_drafters([lookup])) == ("lookup",)  # nothing covers it: asked
    chain = ChainDrafter(lookup, lookup)
    assert _names(auto_drafters([lookup, chain])) == ("lookup",)  # a fixed recipe: never


def test_the_suffix_index_finds_every_match_lookup_finds_and_as_long() -> None:
    # The claim `subsumes` rests on: over a text with copies of every length, wherever
    # lookup finds a match the index finds one at least as long.
    text = [*range(40), *range(10, 30), 7, *range(20, 45), 3, 4, 5, *range(12, 18)]
    lookup, suffix = PromptLookupDrafter(), SuffixDrafter()
    suffix.begin(Answer(prompt=[]))
    for end in range(2, len(text) + 1):
        context = text[:end]
        _, lookup_match = lookup.find(context, 8)
        offer = suffix.offer(context, 8, None)
        if lookup_match:
            assert offer is not None, end
            found = re.match(r"(\d+)-token match", offer.detail)
            assert found is not None and int(found.group(1)) >= lookup_match, end
        suffix.observe(Outcome(context, Draft((), None, 0.0, "plain"), 0))


def test_auto_does_not_ask_lookup_beside_the_suffix_index(decoder: SpeculativeDecoder) -> None:
    asked: list[str] = []
    for drafter in decoder.drafters:
        offer = drafter.offer

        def counted(context, k_cap, prices, offer=offer, name=drafter.name):  # type: ignore[no-untyped-def]
            asked.append(name)
            return offer(context, k_cap, prices)

        drafter.offer = counted  # type: ignore[method-assign]
    prompt = decoder.target.tokenize(CHAT_PROMPTS[1])
    done = run(decoder, prompt, mode="auto", max_tokens=24)
    assert done.rounds and "suffix" in asked
    assert "lookup" not in asked and "chain" not in asked
