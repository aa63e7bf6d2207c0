"""The lookup ceiling: exact on small cases worked out by hand."""

from __future__ import annotations

import pytest

from specchat.bench.live.ceiling import lookup_ceiling


def test_nothing_to_copy_means_plain_is_best() -> None:
    costs = {1: 10.0, 2: 12.0, 4: 16.0}
    assert lookup_ceiling([1, 2, 3], [7, 8, 9, 6], costs) == pytest.approx(1.0)


def test_a_copied_answer_is_checked_in_the_cheapest_passes() -> None:
    # The answer repeats the prompt after its first token: plain for the first token (10),
    # then lookup proposes the rest; one pass of 4 rows (16) yields the last 4 tokens.
    prompt = [5, 1, 2, 3, 4]
    answer = [5, 1, 2, 3, 4]
    costs = {1: 10.0, 2: 12.0, 4: 16.0}
    assert lookup_ceiling(prompt, answer, costs) == pytest.approx(50.0 / 26.0)


def test_costlier_passes_lower_the_ceiling() -> None:
    prompt = [5, 1, 2, 3, 4]
    answer = [5, 1, 2, 3, 4]
    cheap = lookup_ceiling(prompt, answer, {1: 10.0, 2: 12.0, 4: 16.0})
    dear = lookup_ceiling(prompt, answer, {1: 10.0, 2: 19.0, 4: 38.0})
    assert dear < cheap
    assert dear >= 1.0  # plain is always an option
