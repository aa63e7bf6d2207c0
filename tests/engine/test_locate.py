"""Prompt lookup's search: the longest earlier occurrence of the ending, the latest on ties."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from specchat.engine.drafting.lookup.lookup_drafter import FEW, locate


def by_definition(context: Sequence[int], max_extent: int) -> tuple[int, int]:
    """locate() as its docstring defines it, one candidate and one token at a time."""
    best, found = 0, -1
    last = len(context) - 1
    for end in range(last):
        extent = 0
        while extent < max_extent and end - extent >= 0:
            if context[end - extent] != context[last - extent]:
                break
            extent += 1
        if extent and extent >= best:
            best, found = extent, end
    return (found + 1, best) if found >= 0 else (-1, 0)


@pytest.mark.parametrize("vocabulary", [2, 3, 7, 60])
def test_locate_finds_what_the_definition_finds(vocabulary: int) -> None:
    """Random texts over small vocabularies (many candidates, long agreements) and texts that
    end in a copy of an earlier stretch (a long match among few candidates), at every cap
    on either side of the point where the candidates are few enough to measure one by one."""
    rng = np.random.default_rng(vocabulary)
    for _ in range(400):
        text = rng.integers(0, vocabulary, size=int(rng.integers(0, 160))).tolist()
        if len(text) > 10 and rng.random() < 0.5:
            start = int(rng.integers(0, len(text) - 5))
            text += text[start : start + int(rng.integers(1, 90))]
        for max_extent in (1, 2, FEW, FEW + 1, 24, 64):
            assert locate(text, max_extent) == by_definition(text, max_extent), (text, max_extent)


def test_a_long_copy_is_found_whatever_the_text_is_held_in() -> None:
    base = list(range(100, 140))
    text = [1, 2, *base, 3, 4, 5, *base[:30]]
    expected = (2 + 30, 30)  # the token after the copied stretch's 30th token, 30 back
    assert by_definition(text, 64) == expected
    assert locate(text, 64) == expected
    assert locate(tuple(text), 64) == expected
    assert locate(np.array(text), 64) == expected
    assert locate(text, 8) == (2 + 30, 8)
