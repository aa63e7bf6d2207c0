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

Where the two loops legitimately differ (the budget's last token, a drafted end-of-generation
token), the comparison reads it as tests/helpers/oracle_rounds.py says.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from specchat.engine.decoding.decoder import SpeculativeDecoder
from specchat.engine.drafting.base import LoadedPair
from specchat.engine.llamacpp.model import LlamaModel
from specchat.engine.types import SamplingParams
from specchat.tinymodels import TinyModels
from tests.helpers.engine import run
from tests.helpers.llama_oracle import run_oracle
from tests.helpers.oracle_rounds import answer_tokens, compare_rounds

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
    decoder = SpeculativeDecoder(LoadedPair.of(target, draft))
    decoder.drafters["draft"].min_confidence = 0.0
    return decoder


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

    compare_rounds(ours.rounds, theirs.rounds, len(prompt), target, k=K, n_tokens=N_TOKENS)
    assert ours.tokens == plain.tokens
    assert ours.tokens == answer_tokens(theirs.tokens, target)[:N_TOKENS]
    assert sum(len(r.draft) for r in ours.rounds) > 0  # it did speculate
