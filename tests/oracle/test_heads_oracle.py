"""Draft heads and hybrid rollback against llama.cpp's own speculative loop, round by round.

On tiny files of llama.cpp's own layouts (specchat.tinyarch), at T = 0 and a fixed K:
- the MTP head of a Qwen3.5-style hybrid (`--spec-type draft-mtp`): llama.cpp gives the
  target K recurrent-state snapshots and drops rejected drafts natively, as SpecChat does;
- a Gemma 4 assistant beside its target (`draft-mtp` with the assistant as `-md`);
- a hybrid draft model for a hybrid target (`draft-simple`): llama.cpp's loop restores a
  checkpoint and re-checks the kept tokens as the next round's "draft" (rounds marked
  reused), which puts its later rounds at other positions than SpecChat's. Every proposal
  made at a position both loops draft at is compared, and the answers.
Numerics as llama.cpp's: one thread, F16 keys, the same context size.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from specchat.engine.decoding.decoder import SpeculativeDecoder
from specchat.engine.drafting.base import LoadedPair
from specchat.engine.drafting.mtp import load_assistant
from specchat.engine.llamacpp.model import LlamaModel
from specchat.engine.types import SamplingParams
from specchat.tinyarch import write_tiny_gemma4, write_tiny_gemma4_assistant, write_tiny_qwen35
from tests.helpers.engine import Run, run
from tests.helpers.llama_oracle import OracleRun, run_oracle
from tests.helpers.oracle_rounds import answer_tokens, compare_rounds, through_end

pytestmark = pytest.mark.package

K = 3
N_TOKENS = 48
N_CTX = 1024
GREEDY = SamplingParams(temperature=0.0)
PROMPTS = (
    "the cat sat on the mat, the cat sat on the hat",
    "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n",
)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("oracle-heads")
    return {
        "qwen35": write_tiny_qwen35(folder / "qwen35-mtp.gguf", mtp=True),
        "qwen35_draft": write_tiny_qwen35(folder / "qwen35-draft.gguf", perturb=0.02, mtp=False),
        "gemma4": write_tiny_gemma4(folder / "gemma4.gguf"),
        "assistant": write_tiny_gemma4_assistant(folder / "gemma4-assistant.gguf"),
    }


def _load(path: Path, **options: object) -> LlamaModel:
    return LlamaModel(path, n_ctx=N_CTX, n_threads=1, exact_keys=False, **options)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def hybrid(files: dict[str, Path]) -> Iterator[LlamaModel]:
    with _load(files["qwen35"], load_mtp=True) as model:
        yield model


def _check(ours: Run, plain: Run, theirs: OracleRun, prompt: list[int], target: LlamaModel) -> None:
    compare_rounds(ours.rounds, theirs.rounds, len(prompt), target, k=K, n_tokens=N_TOKENS)
    assert ours.tokens == plain.tokens
    assert ours.tokens == answer_tokens(theirs.tokens, target)[:N_TOKENS]
    assert sum(len(r.draft) for r in ours.rounds) > 0


@pytest.mark.parametrize("text", PROMPTS)
def test_the_mtp_head_drafts_as_llama_cpp_round_for_round(
    hybrid: LlamaModel, files: dict[str, Path], text: str
) -> None:
    hybrid.reset()
    decoder = SpeculativeDecoder(LoadedPair.of(hybrid))
    prompt = hybrid.tokenize(text)
    ours = run(decoder, prompt, mode="mtp", k=K, max_tokens=N_TOKENS, sampling=GREEDY)
    plain = run(decoder, prompt, mode="plain", max_tokens=N_TOKENS, sampling=GREEDY)
    theirs = run_oracle(
        files["qwen35"], prompt, spec_type="draft-mtp", k=K, n_predict=N_TOKENS, n_ctx=N_CTX
    )
    _check(ours, plain, theirs, prompt, hybrid)


@pytest.mark.parametrize("text", PROMPTS)
def test_the_gemma4_assistant_drafts_as_llama_cpp_round_for_round(
    files: dict[str, Path], text: str
) -> None:
    with _load(files["gemma4"]) as target:
        decoder = SpeculativeDecoder(
            LoadedPair.of(target, head=load_assistant(files["assistant"], target))
        )
        prompt = target.tokenize(text)
        ours = run(decoder, prompt, mode="assistant", k=K, max_tokens=N_TOKENS, sampling=GREEDY)
        plain = run(decoder, prompt, mode="plain", max_tokens=N_TOKENS, sampling=GREEDY)
        theirs = run_oracle(
            files["gemma4"],
            prompt,
            draft=files["assistant"],
            spec_type="draft-mtp",
            k=K,
            n_predict=N_TOKENS,
            n_ctx=N_CTX,
        )
        _check(ours, plain, theirs, prompt, target)


@pytest.mark.parametrize("text", PROMPTS)
def test_a_hybrid_draft_model_drafts_as_llama_cpp_where_both_draft(
    hybrid: LlamaModel, files: dict[str, Path], text: str
) -> None:
    hybrid.reset()
    with _load(files["qwen35_draft"]) as draft:
        decoder = SpeculativeDecoder(LoadedPair.of(hybrid, draft))
        decoder.drafters["draft"].min_confidence = 0.0
        prompt = hybrid.tokenize(text)
        ours = run(decoder, prompt, mode="draft", k=K, max_tokens=N_TOKENS, sampling=GREEDY)
        plain = run(decoder, prompt, mode="plain", max_tokens=N_TOKENS, sampling=GREEDY)
    theirs = run_oracle(
        files["qwen35"],
        prompt,
        draft=files["qwen35_draft"],
        spec_type="draft-simple",
        k=K,
        n_predict=N_TOKENS,
        n_ctx=N_CTX,
    )
    assert any(r.restored for r in theirs.rounds)  # llama.cpp did roll its target back
    ours_at = {}
    generated = 0
    for result in ours.rounds:
        if result.rows:
            ours_at[len(prompt) - 1 + generated] = result
        generated += len(result.events)
    compared = 0
    for oracle in theirs.rounds:
        left = N_TOKENS - (oracle.pos - (len(prompt) - 1))
        mine = ours_at.get(oracle.pos)
        if oracle.reused or mine is None or left < K + 1:
            continue
        assert mine.draft == through_end(oracle.draft, hybrid), f"drafts differ at {oracle.pos}"
        compared += 1
    assert compared >= 3
    assert ours.tokens == plain.tokens
    assert ours.tokens == answer_tokens(theirs.tokens, hybrid)[:N_TOKENS]
