"""SpecChat's DFlash drafter against llama.cpp's `draft-dflash`, round by round.

On the tiny files of tinyarch (a DFlash draft beside the tiny Qwen3.5-style hybrid target),
at T = 0 and a fixed K, both sides speculate from the same prompt ids; every round must
check the same draft at the same position and keep the same tokens, and both answers must
be plain decoding's. llama.cpp's side is spec-oracle (tests/helpers/llama_oracle.py): its
own speculative-simple loop over common_speculative.

What is configured so that the two are comparable (each a setting, none a change to either
side's drafting):

- The block: llama.cpp denoises `--spec-draft-n-max` masks; SpecChat's draft the trained
  block's by default, so its n_max is set to K as well.
- No confidence cut-off (SpecChat's head drafters have none by default, llama.cpp's
  `--spec-draft-p-min 0`); one thread, F16 keys, the same context size, CPU.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from specchat.engine.decoding.decoder import SpeculativeDecoder
from specchat.engine.drafting.base import LoadedPair
from specchat.engine.drafting.dflash import load_dflash
from specchat.engine.llamacpp.model import LlamaModel
from specchat.engine.types import SamplingParams
from specchat.tinyarch import write_tiny_dflash, write_tiny_qwen35
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
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("dflash-oracle")
    return (
        write_tiny_qwen35(folder / "qwen35.gguf", mtp=False),
        write_tiny_dflash(folder / "dflash.gguf"),
    )


@pytest.fixture(scope="module")
def decoder(files: tuple[Path, Path]) -> Iterator[SpeculativeDecoder]:
    target_path, draft_path = files
    with LlamaModel(target_path, n_ctx=N_CTX, n_threads=1, exact_keys=False) as target:
        head = load_dflash(draft_path, target)
        head.n_max = K  # llama.cpp's --spec-draft-n-max
        yield SpeculativeDecoder(LoadedPair.of(target, head=head))


@pytest.mark.parametrize("text", [*CHAT_PROMPTS, LONG_PROMPT])
def test_drafts_equal_llama_cpp_draft_dflash_round_for_round(
    files: tuple[Path, Path], decoder: SpeculativeDecoder, text: str
) -> None:
    target = decoder.target
    prompt = target.tokenize(text)
    target.reset()  # llama.cpp's caches start empty
    ours = run(decoder, prompt, mode="dflash", k=K, max_tokens=N_TOKENS, sampling=GREEDY)
    plain = run(decoder, prompt, mode="plain", max_tokens=N_TOKENS, sampling=GREEDY)
    theirs = run_oracle(
        files[0],
        prompt,
        draft=files[1],
        spec_type="draft-dflash",
        k=K,
        n_predict=N_TOKENS,
        n_ctx=N_CTX,
    )

    compare_rounds(ours.rounds, theirs.rounds, len(prompt), target, k=K, n_tokens=N_TOKENS)
    assert len([r for r in ours.rounds if r.rows > 0]) > 5
    assert ours.tokens == plain.tokens
    assert ours.tokens == answer_tokens(theirs.tokens, target)[:N_TOKENS]
    assert sum(len(r.draft) for r in ours.rounds) > 0  # it did speculate


def test_the_drafts_compared_follow_the_targets_features(decoder: SpeculativeDecoder) -> None:
    # Not one token over and over, which a draft blind to what it is fed would also match.
    prompt = decoder.target.tokenize(CHAT_PROMPTS[1])
    ours = run(decoder, prompt, mode="dflash", k=K, max_tokens=N_TOKENS, sampling=GREEDY)
    assert len({r.draft for r in ours.rounds if r.draft}) > 3
