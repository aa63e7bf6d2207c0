"""The DFlash drafter on the tiny files: a draft of llama.cpp's `dflash` layout beside the
tiny Qwen3.5-style hybrid target of tinyarch (an M-RoPE model whose cache rolls back with
llama.cpp's recurrent-state snapshots).

Random weights agree with the target little, so these check the wiring and exactness: T = 0
answers equal plain decoding's over long answers, every round drafting K tokens; the
draft's cache follows the target's through every rollback. tests/oracle checks the drafts
themselves against llama.cpp's own DFlash driver.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from specchat.cli import main
from specchat.engine.decoding.decoder import SpeculativeDecoder
from specchat.engine.drafting.base import LoadedPair
from specchat.engine.drafting.dflash import load_dflash
from specchat.engine.drafting.dflash.dflash_driver import DFlashDraft
from specchat.engine.drafting.dflash.dflash_tiny import BLOCK_SIZE
from specchat.engine.llamacpp.model import LlamaModel, ModelLoadError
from specchat.engine.session import ChatEngine
from specchat.tinyarch import write_tiny_dflash, write_tiny_qwen35
from specchat.tinymodels import TinySpec, write_tiny_model
from tests.helpers.engine import CHAT_PROMPTS, run

K = 4


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("dflash")
    return {
        "target": write_tiny_qwen35(folder / "qwen35.gguf", mtp=False),
        "dflash": write_tiny_dflash(folder / "dflash.gguf"),
    }


@pytest.fixture(scope="module")
def target(files: dict[str, Path]) -> Iterator[LlamaModel]:
    with LlamaModel(files["target"], n_ctx=1024, n_threads=1) as model:
        yield model


@pytest.fixture(scope="module")
def decoder(files: dict[str, Path], target: LlamaModel) -> SpeculativeDecoder:
    return SpeculativeDecoder(LoadedPair.of(target, head=load_dflash(files["dflash"], target)))


def _block(decoder: SpeculativeDecoder) -> DFlashDraft:
    head = decoder.drafters["dflash"].head
    assert isinstance(head, DFlashDraft)
    return head


def test_the_draft_reads_its_files_block(decoder: SpeculativeDecoder) -> None:
    block = _block(decoder)
    assert block.block_size == BLOCK_SIZE and block.n_max == BLOCK_SIZE - 1
    assert block.mask_token == 0  # write_tiny_dflash's mask token
    drafter = decoder.drafters["dflash"]
    assert drafter.listing.label == "DFlash draft"
    assert drafter.origin == "the DFlash draft"


@pytest.mark.parametrize("text", CHAT_PROMPTS)
def test_t0_answers_equal_plain_decoding(decoder: SpeculativeDecoder, text: str) -> None:
    prompt = decoder.target.tokenize(text)
    plain = run(decoder, prompt, mode="plain", max_tokens=240)
    spec = run(decoder, prompt, mode="dflash", k=K, max_tokens=240)
    assert len(plain.tokens) >= 200
    assert spec.tokens == plain.tokens
    # Every round drafts K tokens, until the answer's last few leave room for fewer.
    assert all(r.choice.mode == "dflash" and r.drafted == K for r in spec.rounds[:-K])


def test_a_round_drafts_at_most_the_blocks_masks(decoder: SpeculativeDecoder) -> None:
    block = _block(decoder)
    prompt = decoder.target.tokenize(CHAT_PROMPTS[0])
    plain = run(decoder, prompt, mode="plain", max_tokens=60)
    try:
        block.n_max = 3
        spec = run(decoder, prompt, mode="dflash", k=8, max_tokens=60)
        offer = decoder.drafters["dflash"].offer(prompt, 8, None)
    finally:
        block.n_max = BLOCK_SIZE - 1
    assert spec.tokens == plain.tokens
    assert max(r.drafted for r in spec.rounds) == 3
    assert offer is not None and offer.k_max == 3  # what auto may ask of it


def test_drafting_after_other_rounds_and_new_prompts_stays_exact(
    decoder: SpeculativeDecoder,
) -> None:
    # Rounds it does not draft (plain, lookup) feed its cache all the same; a new prompt
    # drops it back to the prefix the target keeps.
    prompt = decoder.target.tokenize(CHAT_PROMPTS[1])
    plain = run(decoder, prompt, mode="plain", max_tokens=60)
    first = run(decoder, prompt, mode="lookup", max_tokens=20)
    rest = run(decoder, [*prompt, *first.tokens], mode="dflash", k=3, max_tokens=40)
    assert first.tokens + rest.tokens == plain.tokens
    for text in (CHAT_PROMPTS[0], CHAT_PROMPTS[0][:-12], CHAT_PROMPTS[2]):
        prompt = decoder.target.tokenize(text)
        plain = run(decoder, prompt, mode="plain", max_tokens=50)
        spec = run(decoder, prompt, mode="dflash", k=K, max_tokens=50)
        assert spec.tokens == plain.tokens
        assert _block(decoder).ready


def test_a_draft_file_of_dflash_architecture_loads_as_the_targets_head(
    files: dict[str, Path],
) -> None:
    engine = ChatEngine.load(files["target"], files["dflash"], n_ctx=512, n_threads=1)
    try:
        assert isinstance(engine.head, DFlashDraft) and engine.draft is None
        assert "dflash" in engine.decoder.drafters.names()
    finally:
        engine.close()


def test_specchat_generate_drafts_with_a_dflash_file(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["generate", "--target", str(files["target"]), "--draft", str(files["dflash"])]
    argv += ["--mode", "dflash", "--k", "3", "--max-tokens", "24", "--threads", "1"]
    argv += ["--n-ctx", "512", "--color", "never", "--prompt", "the cat sat on the mat"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "drafts from the target's hidden state: DFlash draft" in err
    assert "drafted 0," not in err


def test_a_draft_reading_layers_its_target_lacks_is_refused(
    files: dict[str, Path], tmp_path: Path
) -> None:
    # write_tiny_dflash reads layers 1 and 3; tinymodels' llama target has two.
    llama = write_tiny_model(tmp_path / "llama.gguf", TinySpec(seed=1))
    with (
        LlamaModel(llama, n_ctx=256, n_threads=1) as other,
        pytest.raises(ModelLoadError, match="reads target layer 3; the target has 2"),
    ):
        load_dflash(files["dflash"], other)
