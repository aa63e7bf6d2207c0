"""Reading llama.cpp's speculative rounds (spec-oracle) against SpecChat's.

Where the two loops legitimately differ, and how the comparison reads it:

- The last token of the budget. llama.cpp caps a draft at `n_predict - generated - 1`,
  but its drafters read a cap of 0 as "no cap" and draft K, and its loop stops only once it
  has generated *more* than `-n`. SpecChat decodes that last token plainly and stops at
  exactly `max_tokens`. So a round with one token of budget left is compared as SpecChat's
  plain pass against the same position of llama.cpp's, and llama.cpp's rounds past the
  budget have no counterpart.
- A drafted end-of-generation token. SpecChat's drafters stop a draft there (nothing after
  the answer's end can be kept); llama.cpp's draft on. llama.cpp's drafts are compared up to
  and including such a token: what follows it is never checked against anything.
"""

from __future__ import annotations

from collections.abc import Sequence

from specchat.engine.llamacpp.model import LlamaModel
from specchat.engine.types import RoundResult
from tests.helpers.llama_oracle import OracleRound


def through_end(tokens: Sequence[int], target: LlamaModel) -> tuple[int, ...]:
    """`tokens` up to and including the first end-of-generation token."""
    for i, token in enumerate(tokens):
        if target.is_eog(token):
            return tuple(tokens[: i + 1])
    return tuple(tokens)


def answer_tokens(tokens: Sequence[int], target: LlamaModel) -> list[int]:
    """The answer's tokens: those before an end-of-generation token (never emitted)."""
    kept = through_end(tokens, target)
    return list(kept[:-1] if kept and target.is_eog(kept[-1]) else kept)


def compare_rounds(
    ours: Sequence[RoundResult],
    theirs: Sequence[OracleRound],
    prompt_len: int,
    target: LlamaModel,
    *,
    k: int,
    n_tokens: int,
) -> None:
    """SpecChat's rounds against llama.cpp's, one for one: the same position, the same draft
    (fixed K, no confidence stop), the same kept tokens; see the module's notes for the
    budget's last token and a drafted end-of-generation token."""
    passes = [r for r in ours if r.rows > 0]  # the last round of a run may have no pass
    generated = 0
    compared = 0
    for oracle in theirs:
        assert not oracle.reused and not oracle.restored  # a transformer target drops tokens
        left = n_tokens - generated
        if left <= 0:
            break  # llama.cpp's loop runs past the budget; SpecChat has stopped
        assert compared < len(passes), f"SpecChat stopped before llama.cpp's round {oracle.index}"
        mine = passes[compared]
        where = f"round {oracle.index} at position {oracle.pos}"
        assert prompt_len - 1 + generated == oracle.pos, where
        expected = through_end(oracle.draft[: max(0, left - 1)], target)
        if left >= 2:
            # Fixed K held on llama.cpp's side: no confidence stop, only the budget.
            assert len(oracle.draft) == min(k, left - 1), where
        assert mine.draft == expected, f"{where}: drafts differ"
        kept = [e.token for e in mine.events]
        assert kept == answer_tokens(oracle.ids[: len(expected) + 1], target), where
        generated += len(oracle.ids)
        compared += 1
        if any(target.is_eog(t) for t in oracle.ids):
            break
    assert compared == len(passes), "SpecChat made passes llama.cpp did not"
