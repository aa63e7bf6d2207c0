"""Tests for prompt lookup: the longest match first, then the most recent."""

from __future__ import annotations

import numpy as np
import pytest

from specchat.engine.drafting import PromptLookupDrafter
from specchat.engine.types import SamplingParams


def test_longest_match_wins_over_more_recent_shorter_one() -> None:
    lookup = PromptLookupDrafter()
    # "1 2 3" is followed by 10 11 early on; "3" alone recurs later, followed by 99.
    context = [1, 2, 3, 10, 11, 7, 3, 99, 5, 1, 2, 3]
    tokens, n = lookup.find(context, 4)
    assert (tokens, n) == ((10, 11, 7, 3), 3)


def test_most_recent_of_equal_matches_wins() -> None:
    lookup = PromptLookupDrafter()
    context = [5, 6, 1, 5, 6, 2, 5, 6]
    tokens, n = lookup.find(context, 2)
    assert (tokens, n) == ((2, 5), 2)


def test_no_match_no_draft() -> None:
    lookup = PromptLookupDrafter()
    draft = lookup.propose([1, 2, 3, 4], 5, SamplingParams(), np.random.default_rng(0))
    assert draft.tokens == ()
    assert draft.source == "lookup"
    assert draft.probs is None


def test_continuation_is_cut_at_k_and_at_the_end() -> None:
    lookup = PromptLookupDrafter()
    assert lookup.find([4, 8, 9, 4], 1) == ((8,), 1)
    assert lookup.find([4, 8, 4], 8) == ((8, 4), 1)


def test_match_length_is_how_far_back_the_text_agrees() -> None:
    source = list(range(100, 140))
    # The answer has copied source[0:25]; the match reaches back over all 25 tokens.
    context = [*source, 7, *source[:25]]
    tokens, n = PromptLookupDrafter().find(context, 5)
    assert tokens == tuple(source[25:30])
    assert n == 25
    # A cap on how far back it looks caps the length reported, not the proposal.
    assert PromptLookupDrafter(max_extent=8).find(context, 5) == (tuple(source[25:30]), 8)


def test_the_occurrence_agreeing_furthest_back_wins_over_a_more_recent_one() -> None:
    # Both earlier "4 5" are followed by something else; the older one agrees four tokens back.
    context = [1, 2, 3, 4, 5, 60, 9, 9, 4, 5, 70, 8, 1, 2, 3, 4, 5]
    assert PromptLookupDrafter().find(context, 2) == ((60, 9), 5)


def test_min_extent_rejects_short_matches() -> None:
    lookup = PromptLookupDrafter(min_extent=3)
    assert lookup.find([1, 2, 9, 5, 2], 3) == ((), 0)
    assert lookup.find([1, 2, 3, 9, 1, 2, 3], 3) == ((9, 1, 2), 3)


def test_the_draft_model_stops_at_a_token_it_is_unsure_of(tiny_models) -> None:  # type: ignore[no-untyped-def]
    """Its confidence stop: the first token is always drafted, later ones only while the
    draft model gives them at least `min_confidence`."""
    import numpy as np

    from specchat.engine.drafting import DraftModelDrafter
    from specchat.engine.llamacpp.model import LlamaModel
    from specchat.engine.types import SamplingParams

    model = LlamaModel(tiny_models.draft_close, n_ctx=256)
    try:
        context = model.tokenize("the cat sat on the mat and", add_special=False)
        rng = np.random.default_rng(0)
        never = DraftModelDrafter(model, min_confidence=1.01)  # no token is that sure
        assert len(never.propose(context, 6, SamplingParams(), rng).tokens) == 1
        always = DraftModelDrafter(model, min_confidence=0.0)
        assert len(always.propose(context, 6, SamplingParams(), rng).tokens) == 6
        sampled = never.propose(context, 6, SamplingParams(temperature=0.8, seed=1), rng)
        assert len(sampled.tokens) == 1 and sampled.probs is not None and len(sampled.probs) == 1
    finally:
        model.close()


def test_a_catch_up_round_teaches_the_catch_up_not_a_free_drafted_token(tiny_models) -> None:  # type: ignore[no-untyped-def]
    """After a catch-up, the decode that evaluated the unseen text also gave the first
    drafted token: at K = 1 nothing is left to time a drafted token by (charging the
    remainder to it taught auto that drafting costs nothing, and it kept drafting at a loss)."""
    from specchat.engine.drafting import DraftModelDrafter
    from specchat.engine.drafting.base import Outcome
    from specchat.engine.llamacpp.model import LlamaModel

    model = LlamaModel(tiny_models.draft_close, n_ctx=256)
    try:
        context = model.tokenize(
            "the cat sat on the mat and the dog sat on the log", add_special=False
        )
        rng = np.random.default_rng(0)
        drafter = DraftModelDrafter(model, min_confidence=0.0)
        first = drafter.propose(context, 1, SamplingParams(), rng)
        assert first.catchup == len(context)
        drafter.observe(Outcome([*context, *first.tokens], first, 1))
        assert drafter.catchup_token_ms is not None and drafter.catchup_token_ms > 0
        assert drafter.draft_token_ms is None
        # In step again (one kept token and the target's next to catch up on): a draft of 3
        # times its two later tokens' decodes.
        context = [*context, *first.tokens, first.tokens[0]]
        second = drafter.propose(context, 3, SamplingParams(), rng)
        assert second.catchup <= 2
        drafter.observe(Outcome([*context, second.tokens[0]], second, 0))
        assert drafter.draft_token_ms is not None and drafter.draft_token_ms > 0.05
    finally:
        model.close()


def test_a_fully_kept_drafts_two_row_first_pass_is_priced_as_its_own_size(tiny_models) -> None:  # type: ignore[no-untyped-def]
    """After a fully kept draft the draft model's first pass reads two tokens (its last
    drafted one, never read, and the target's own): a pass of two rows, dearer than one of
    one. Its time teaches the two-row price, never a drafted token's (charged to one token
    it priced tokens at a two-row pass after every fully kept draft), and the next offer
    after a fully kept draft carries the difference as a cost of the round."""
    from specchat.engine.drafting import DraftModelDrafter
    from specchat.engine.drafting.base import Outcome
    from specchat.engine.llamacpp.model import LlamaModel

    one_row_ms, two_rows_ms, catchup_row_ms = 17.0, 32.0, 4.0
    now = [0.0]
    model = LlamaModel(tiny_models.draft_close, n_ctx=256)
    decode = model.decode

    def timed_decode(tokens, **kwargs):  # type: ignore[no-untyped-def]
        rows = len(tokens)
        ms = {1: one_row_ms, 2: two_rows_ms}.get(rows, catchup_row_ms * rows)
        now[0] += ms / 1000.0
        return decode(tokens, **kwargs)

    model.decode = timed_decode  # type: ignore[method-assign]
    try:
        context = model.tokenize("the cat sat on the mat and the dog sat on", add_special=False)
        rng = np.random.default_rng(0)
        drafter = DraftModelDrafter(model, min_confidence=0.0, clock=lambda: now[0])
        first = drafter.propose(context, 3, SamplingParams(), rng)  # a catch-up
        drafter.observe(Outcome([*context, first.tokens[0], 0], first, 0))
        # Rejected at its first token: the next round reads one token, the target's.
        context = [*context, 0]
        assert drafter.offer(context, 3, None).round_ms == 0.0  # type: ignore[union-attr]
        second = drafter.propose(context, 3, SamplingParams(), rng)
        assert second.catchup == 1 and second.decodes == 3
        drafter.observe(Outcome([*context, *second.tokens, 1], second, 3))
        assert drafter.draft_token_ms == pytest.approx(one_row_ms)
        # Fully kept: its last token and the target's are read in one pass of two rows.
        context = [*context, *second.tokens, 1]
        offer = drafter.offer(context, 3, None)
        assert offer is not None and offer.round_ms > 0.0 and offer.extra_ms == 0.0
        third = drafter.propose(context, 3, SamplingParams(), rng)
        assert third.catchup == 2
        drafter.observe(Outcome([*context, *third.tokens, 1], third, 3))
        assert drafter.draft_token_ms == pytest.approx(one_row_ms)  # no two-row pass in it
        two = drafter.table.cost_ms(2)
        assert two is not None and two > offer.round_ms + one_row_ms  # moved toward 32 ms
        again = drafter.offer([*context, *third.tokens, 1], 3, None)
        assert again is not None and again.round_ms == pytest.approx(two - one_row_ms)
    finally:
        model.decode = decode  # type: ignore[method-assign]
        model.close()
