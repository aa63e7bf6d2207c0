"""Tests for prompt lookup: longest match first, then the most recent."""

from __future__ import annotations

import numpy as np

from specchat.engine.drafting import PromptLookupDrafter
from specchat.engine.types import DraftMode, SamplingParams


def test_longest_match_wins_over_more_recent_shorter_one() -> None:
    lookup = PromptLookupDrafter(max_ngram=3)
    # "1 2 3" is followed by 10 11 early on; "3" alone recurs later, followed by 99.
    context = [1, 2, 3, 10, 11, 7, 3, 99, 5, 1, 2, 3]
    tokens, n = lookup.find(context, 4)
    assert (tokens, n) == ((10, 11, 7, 3), 3)


def test_most_recent_of_equal_matches_wins() -> None:
    lookup = PromptLookupDrafter(max_ngram=2)
    context = [5, 6, 1, 5, 6, 2, 5, 6]
    tokens, n = lookup.find(context, 2)
    assert (tokens, n) == ((2, 5), 2)


def test_no_match_no_draft() -> None:
    lookup = PromptLookupDrafter()
    draft = lookup.propose([1, 2, 3, 4], 5, SamplingParams(), np.random.default_rng(0))
    assert draft.tokens == ()
    assert draft.source == DraftMode.LOOKUP
    assert draft.probs is None


def test_continuation_is_cut_at_k_and_at_the_end() -> None:
    lookup = PromptLookupDrafter()
    assert lookup.find([4, 8, 9, 4], 1) == ((8,), 1)
    assert lookup.find([4, 8, 4], 8) == ((8, 4), 1)
