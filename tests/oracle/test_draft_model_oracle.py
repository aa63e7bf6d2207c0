"""SpecChat's draft-model drafter against llama.cpp's `draft-simple`, round by round.

On the tiny models, at T = 0 and a fixed K, both sides speculate from the same prompt ids;
every round must check the same draft at the same position and keep the same tokens, and
both answers must be plain decoding's. llama.cpp's side is spec-oracle
(tests/helpers/llama_oracle.py): its own speculative-simple loop over common_speculative.

What is configured so that the two are comparable (each a setting, none a change to either
side's drafting):

- The confidence cut-off is off on both sides: SpecChat's drafter stops below
  MIN_CONFIDENCE (0.4) after the first token, llama.cpp's below `--spec-draft-p-min`
  (its probability after a top-10 cut): `min_confidence = 0` and `p-min 0` make every
  round draft exactly min(K, room).
- The same numerics: one thread, F16 keys (the tiny models' head size does not take
  SpecChat's Q8_0 keys anyway), the same context size, CPU.

Where the two loops legitimately differ, and how the comparison reads it:

- The last token of the budget. llama.cpp caps a draft at `n_predict - generated - 1`,
  but `draft-simple` reads a cap of 0 as "no cap" and drafts K, and its loop stops only
  once it has generated *more* than `-n`. SpecChat decodes that last token plainly and
  stops at exactly `max_tokens`. So a round with one token of budget left is compared as
  SpecChat's plain pass against the same position of llama.cpp's, and llama.cpp's rounds
  past the budget have no counterpart.
- A drafted end-of-generation token. SpecChat's drafter stops a draft there (nothing after
  the answer's end can be kept); `draft-simple` drafts on. llama.cpp's drafts are compared
  up to and including such a token: what follows it is never checked against anything.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from specchat.engine.decoding.decoder import SpeculativeDecoder
from specchat.engine.llamacpp.model import LlamaModel
from specchat.engine.types import RoundResult, SamplingParams
from specchat.tinymodels import TinyModels
from tests.helpers.engine import run
from tests.helpers.llama_oracle import OracleRound, run_oracle

pytestmark = pytest.mark.package

K = 4
N_TOKENS = 48
N_CTX = 1024
GREEDY = SamplingParams(temperature=0.0)
PROMPTS = (
    "the cat sat on the mat, the cat sat on the hat",
    "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n",
    "hello world, hello there, hello again",
)
DRAFTS = ("draft_same", "draft_close", "draft_far")


def _load(path: Path) -> LlamaModel:
    return LlamaModel(path, n_ctx=N_CTX, n_threads=1, exact_keys=False)


@pytest.fixture(scope="module")
def target(tiny_models: TinyModels) -> Iterator[LlamaModel]:
    model = _load(tiny_models.target)
    yield model
    model.close()


@pytest.fixture(scope="module")
def drafts(tiny_models: TinyModels) -> Iterator[dict[str, LlamaModel]]:
    models = {name: _load(getattr(tiny_models, name)) for name in DRAFTS}
    yield models
    for model in models.values():
        model.close()


def _decoder(target: LlamaModel, draft: LlamaModel) -> SpeculativeDecoder:
    """A decoder whose draft-model drafter drafts exactly K (no confidence stop), both
    caches empty as llama.cpp's are at its start."""
    target.reset()
    draft.reset()
    decoder = SpeculativeDecoder(target, draft)
    decoder.drafters["draft"].min_confidence = 0.0
    return decoder


def _through_end(tokens: Sequence[int], target: LlamaModel) -> tuple[int, ...]:
    """`tokens` up to and including the first end-of-generation token."""
    for i, token in enumerate(tokens):
        if target.is_eog(token):
            return tuple(tokens[: i + 1])
    return tuple(tokens)


def _answer(tokens: Sequence[int], target: LlamaModel) -> list[int]:
    """The answer's tokens: those before an end-of-generation token (never emitted)."""
    kept = _through_end(tokens, target)
    return list(kept[:-1] if kept and target.is_eog(kept[-1]) else kept)


def _compare_rounds(
    ours: Sequence[RoundResult],
    theirs: Sequence[OracleRound],
    prompt_len: int,
    target: LlamaModel,
) -> None:
    passes = [r for r in ours if r.rows > 0]  # the last round of a run may have no pass
    generated = 0
    compared = 0
    for oracle in theirs:
        assert not oracle.reused and not oracle.restored  # a transformer target drops tokens
        left = N_TOKENS - generated
        if left <= 0:
            break  # llama.cpp's loop runs past the budget; SpecChat has stopped
        assert compared < len(passes), f"SpecChat stopped before llama.cpp's round {oracle.index}"
        mine = passes[compared]
        where = f"round {oracle.index} at position {oracle.pos}"
        assert prompt_len - 1 + generated == oracle.pos, where
        expected = _through_end(oracle.draft[: max(0, left - 1)], target)
        if left >= 2:
            # Fixed K held on llama.cpp's side: no confidence stop, only the budget.
            assert len(oracle.draft) == min(K, left - 1), where
        assert mine.draft == expected, f"{where}: drafts differ"
        kept = [e.token for e in mine.events]
        assert kept == _answer(oracle.ids[: len(expected) + 1], target), where
        generated += len(oracle.ids)
        compared += 1
        if any(target.is_eog(t) for t in oracle.ids):
            break
    assert compared == len(passes), "SpecChat made passes llama.cpp did not"


@pytest.mark.parametrize("text", PROMPTS)
@pytest.mark.parametrize("draft_name", DRAFTS)
def test_drafts_equal_llama_cpp_draft_simple_round_for_round(
    tiny_models: TinyModels,
    target: LlamaModel,
    drafts: dict[str, LlamaModel],
    draft_name: str,
    text: str,
) -> None:
    decoder = _decoder(target, drafts[draft_name])
    prompt = target.tokenize(text)
    ours = run(decoder, prompt, mode="draft", k=K, max_tokens=N_TOKENS, sampling=GREEDY)
    plain = run(decoder, prompt, mode="plain", max_tokens=N_TOKENS, sampling=GREEDY)
    theirs = run_oracle(
        tiny_models.target,
        prompt,
        draft=getattr(tiny_models, draft_name),
        k=K,
        n_predict=N_TOKENS,
        n_ctx=N_CTX,
    )

    _compare_rounds(ours.rounds, theirs.rounds, len(prompt), target)
    assert ours.tokens == plain.tokens
    assert ours.tokens == _answer(theirs.tokens, target)[:N_TOKENS]
    assert sum(len(r.draft) for r in ours.rounds) > 0  # it did speculate
