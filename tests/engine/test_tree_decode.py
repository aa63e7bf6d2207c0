"""Several drafts checked in one target pass, sharing the cached text and their common prefix."""

from __future__ import annotations

import numpy as np
import pytest

from specchat.engine.llamacpp.model import LlamaModel
from specchat.tinymodels import TinyModels

PREFIX = [40, 41, 42, 43, 44]
PATHS = [[50, 60, 61, 62], [50, 60, 70], [50, 80, 81, 82, 83], [50, 90]]
#: Another batch shape sums in another order: logits move by ~0.01 here. A cache holding one
#: token too many (another branch's, or a leftover) moves them by ~10.
NOISE = 0.05


@pytest.fixture(scope="module")
def models(tiny_models: TinyModels):  # type: ignore[no-untyped-def]
    with (
        LlamaModel(tiny_models.target, n_ctx=256, n_threads=1) as tree,
        LlamaModel(tiny_models.target, n_ctx=256, n_threads=1) as plain,
    ):
        yield tree, plain


def sequential(model: LlamaModel, tokens: list[int]) -> np.ndarray:
    model.reset()
    model.decode(PREFIX, logits="none")
    return model.decode(tokens, logits="all")


def test_each_path_gets_the_logits_of_decoding_it_alone(models) -> None:  # type: ignore[no-untyped-def]
    tree, plain = models
    tree.reset()
    tree.decode(PREFIX, logits="none")
    rows = tree.decode_tree(PATHS)
    for path, got in zip(PATHS, rows, strict=True):
        want = sequential(plain, path)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, atol=NOISE)
        assert (got.argmax(axis=1) == want.argmax(axis=1)).all()


@pytest.mark.parametrize(("winner", "keep"), [(0, 3), (2, 5), (3, 1), (1, 3)])
def test_keeping_one_path_leaves_the_cache_of_having_decoded_it(  # type: ignore[no-untyped-def]
    models, winner: int, keep: int
) -> None:
    tree, plain = models
    tree.reset()
    tree.decode(PREFIX, logits="none")
    tree.decode_tree(PATHS)
    tree.keep_path(winner, keep)
    kept = PATHS[winner][:keep]
    assert tree.tokens == PREFIX + kept
    # The next pass sees exactly the prefix and the kept tokens: no other branch, no leftover.
    after = tree.decode([7, 8], logits="all")
    want = sequential(plain, [*kept, 7, 8])[-2:]
    np.testing.assert_allclose(after, want, atol=NOISE)
    # And a second tree on top works the same.
    tree.truncate(len(PREFIX) + keep)
    again = tree.decode_tree([[9, 10], [9, 11]])
    np.testing.assert_allclose(again[1], sequential(plain, [*kept, 9, 11])[-2:], atol=NOISE)
    tree.keep_path(1, 2)
    assert tree.tokens == PREFIX + kept + [9, 11]


def test_bad_trees_are_refused(models) -> None:  # type: ignore[no-untyped-def]
    tree, _ = models
    with pytest.raises(ValueError, match="paths"):
        tree.decode_tree([])
    with pytest.raises(ValueError, match="paths"):
        tree.decode_tree([[1]] * (tree.max_branches + 1))
