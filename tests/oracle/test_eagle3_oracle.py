"""SpecChat's EAGLE-3 drafter against llama.cpp's `draft-eagle3`, round by round.

On tiny files, at T = 0 and a fixed K, both sides speculate from the same prompt ids; every
round must check the same draft at the same position and keep the same tokens, and both
answers must be plain decoding's. llama.cpp's side is spec-oracle (tests/helpers/
llama_oracle.py): its own speculative-simple loop over common_speculative.

Two pairs: the tiny EAGLE-3 draft of tinyarch (random weights, a reduced vocabulary through
d2t: every draft rejected, so every round rolls the draft back by all of it), and the chain
pair of tests/helpers/chain_pair.py (drafts kept none, one, or all K: the boundary then
moves by each amount, or not at all).

What is configured so that the two are comparable (each a setting, none a change to either
side's drafting): no confidence cut-off (SpecChat's head drafters have none by default,
llama.cpp's `--spec-draft-p-min 0`); one thread, F16 keys, the same context size, CPU.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from specchat.engine.decoding.decoder import SpeculativeDecoder
from specchat.engine.drafting.base import LoadedPair
from specchat.engine.drafting.eagle3 import load_eagle3
from specchat.engine.llamacpp.model import LlamaModel
from specchat.engine.types import SamplingParams
from specchat.tinyarch import write_tiny_eagle3
from specchat.tinymodels import TinySpec, write_tiny_model
from tests.helpers.chain_pair import write_chain_pair
from tests.helpers.engine import CHAT_PROMPTS, run
from tests.helpers.llama_oracle import run_oracle
from tests.helpers.oracle_rounds import answer_tokens, compare_rounds

pytestmark = pytest.mark.package

K = 4
N_TOKENS = 48
N_CTX = 1024
GREEDY = SamplingParams(temperature=0.0)
#: Longer than a target batch (512): SpecChat reads it in two calls, llama.cpp in one.
LONG_PROMPT = " ".join(f"line {i}: the cat sat on the mat" for i in range(32))


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    folder = tmp_path_factory.mktemp("eagle3-oracle")
    return {
        "random": (
            write_tiny_model(folder / "llama.gguf", TinySpec(seed=1)),
            write_tiny_eagle3(folder / "eagle3.gguf"),
        ),
        "chain": write_chain_pair(folder),
    }


@pytest.fixture(scope="module", params=["random", "chain"])
def pair(
    request: pytest.FixtureRequest, pairs: dict[str, tuple[Path, Path]]
) -> Iterator[tuple[Path, Path, SpeculativeDecoder]]:
    target_path, draft_path = pairs[request.param]
    with LlamaModel(target_path, n_ctx=N_CTX, n_threads=1, exact_keys=False) as target:
        decoder = SpeculativeDecoder(LoadedPair.of(target, head=load_eagle3(draft_path, target)))
        yield target_path, draft_path, decoder


@pytest.mark.parametrize("text", [*CHAT_PROMPTS, LONG_PROMPT])
def test_drafts_equal_llama_cpp_draft_eagle3_round_for_round(
    pair: tuple[Path, Path, SpeculativeDecoder], text: str
) -> None:
    target_path, draft_path, decoder = pair
    target = decoder.target
    prompt = target.tokenize(text)
    target.reset()  # llama.cpp's caches start empty
    ours = run(decoder, prompt, mode="eagle3", k=K, max_tokens=N_TOKENS, sampling=GREEDY)
    plain = run(decoder, prompt, mode="plain", max_tokens=N_TOKENS, sampling=GREEDY)
    theirs = run_oracle(
        target_path,
        prompt,
        draft=draft_path,
        spec_type="draft-eagle3",
        k=K,
        n_predict=N_TOKENS,
        n_ctx=N_CTX,
    )

    compare_rounds(ours.rounds, theirs.rounds, len(prompt), target, k=K, n_tokens=N_TOKENS)
    assert len([r for r in ours.rounds if r.rows > 0]) > 5
    assert ours.tokens == plain.tokens
    assert ours.tokens == answer_tokens(theirs.tokens, target)[:N_TOKENS]
    assert sum(len(r.draft) for r in ours.rounds) > 0  # it did speculate


def test_the_chain_pair_keeps_none_one_and_all_drafts(
    pairs: dict[str, tuple[Path, Path]],
) -> None:
    # The acceptance paths the comparison above walks on llama.cpp's side too.
    target_path, draft_path = pairs["chain"]
    with LlamaModel(target_path, n_ctx=N_CTX, n_threads=1) as target:
        prompt = target.tokenize(CHAT_PROMPTS[0])
        theirs = run_oracle(
            target_path,
            prompt,
            draft=draft_path,
            spec_type="draft-eagle3",
            k=K,
            n_predict=N_TOKENS,
            n_ctx=N_CTX,
        )
    kept = {r.accepted for r in theirs.rounds}
    assert {0, 1, K} <= kept
