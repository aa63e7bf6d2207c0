"""The EAGLE-3 drafter on the tiny files: a draft of llama.cpp's `eagle3` layout beside
tinymodels' llama target (TinySpec(seed=1)).

Random weights agree with the target little, so these check the wiring and exactness: T = 0
answers equal plain decoding's over long answers, every round drafting K tokens; the
draft's cache follows the target's through every rollback. tests/oracle checks the drafts
themselves against llama.cpp's own EAGLE-3 driver.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from specchat.cli import main
from specchat.engine.decoding.decoder import SpeculativeDecoder
from specchat.engine.drafting.base import LoadedPair
from specchat.engine.drafting.eagle3 import load_eagle3
from specchat.engine.drafting.eagle3.eagle3_driver import Eagle3Draft
from specchat.engine.llamacpp.model import LlamaModel, ModelLoadError
from specchat.engine.session import ChatEngine
from specchat.tinyarch import write_tiny_eagle3
from specchat.tinymodels import TinySpec, write_tiny_model
from tests.helpers.chain_pair import write_chain_pair
from tests.helpers.engine import CHAT_PROMPTS, run

K = 4


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("eagle3")
    return {
        "target": write_tiny_model(folder / "llama.gguf", TinySpec(seed=1)),
        "eagle3": write_tiny_eagle3(folder / "eagle3.gguf"),
    }


@pytest.fixture(scope="module")
def target(files: dict[str, Path]) -> Iterator[LlamaModel]:
    with LlamaModel(files["target"], n_ctx=1024, n_threads=1) as model:
        yield model


@pytest.fixture(scope="module")
def decoder(files: dict[str, Path], target: LlamaModel) -> SpeculativeDecoder:
    return SpeculativeDecoder(LoadedPair.of(target, head=load_eagle3(files["eagle3"], target)))


@pytest.mark.parametrize("text", CHAT_PROMPTS)
def test_t0_answers_equal_plain_decoding(decoder: SpeculativeDecoder, text: str) -> None:
    prompt = decoder.target.tokenize(text)
    plain = run(decoder, prompt, mode="plain", max_tokens=240)
    spec = run(decoder, prompt, mode="eagle3", k=K, max_tokens=240)
    assert len(plain.tokens) >= 200
    assert spec.tokens == plain.tokens
    # Every round drafts K tokens, until the answer's last few leave room for fewer.
    assert all(r.choice.mode == "eagle3" and r.drafted == K for r in spec.rounds[:-K])


def test_the_drafter_is_offered_with_its_label_and_origin(decoder: SpeculativeDecoder) -> None:
    drafter = decoder.drafters["eagle3"]
    assert drafter.listing.label == "EAGLE-3 draft"
    assert drafter.origin == "the EAGLE-3 draft"
    assert "assistant" not in decoder.drafters and "mtp" not in decoder.drafters


def test_drafting_between_plain_rounds_and_other_drafters_stays_exact(
    decoder: SpeculativeDecoder,
) -> None:
    # Rounds the draft does not draft (plain, lookup) still feed its cache: each target
    # pass completes the last boundary (the bridge) when no draft wrote it.
    prompt = decoder.target.tokenize(CHAT_PROMPTS[1])
    plain = run(decoder, prompt, mode="plain", max_tokens=60)
    first = run(decoder, prompt, mode="lookup", max_tokens=20)
    context = [*prompt, *first.tokens]
    rest = run(decoder, context, mode="eagle3", k=3, max_tokens=40)
    assert first.tokens + rest.tokens == plain.tokens


def test_a_new_prompt_drops_the_draft_cache_back_to_the_shared_prefix(
    decoder: SpeculativeDecoder,
) -> None:
    head = decoder.drafters["eagle3"].head
    assert isinstance(head, Eagle3Draft)
    for text in (CHAT_PROMPTS[0], CHAT_PROMPTS[0][:-12], CHAT_PROMPTS[2]):
        prompt = decoder.target.tokenize(text)
        plain = run(decoder, prompt, mode="plain", max_tokens=50)
        spec = run(decoder, prompt, mode="eagle3", k=K, max_tokens=50)
        assert spec.tokens == plain.tokens
        assert head.ready


def test_a_draft_file_of_eagle3_architecture_loads_as_the_targets_head(
    files: dict[str, Path],
) -> None:
    engine = ChatEngine.load(files["target"], files["eagle3"], n_ctx=512, n_threads=1)
    try:
        assert isinstance(engine.head, Eagle3Draft) and engine.draft is None
        assert "eagle3" in engine.decoder.drafters.names()
    finally:
        engine.close()


def test_specchat_generate_drafts_with_an_eagle3_file(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["generate", "--target", str(files["target"]), "--draft", str(files["eagle3"])]
    argv += ["--mode", "eagle3", "--k", "3", "--max-tokens", "24", "--threads", "1"]
    argv += ["--n-ctx", "512", "--color", "never", "--prompt", "the cat sat on the mat"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "drafts from the target's hidden state: EAGLE-3 draft" in err
    assert "drafted 0," not in err


def test_a_draft_that_agrees_in_part_answers_as_plain(tmp_path: Path) -> None:
    # The chain pair (tests/helpers/chain_pair.py): rounds keep none, one or all K drafts,
    # so the draft's boundary moves by each amount, or not at all.
    target_path, draft_path = write_chain_pair(tmp_path)
    with LlamaModel(target_path, n_ctx=1024, n_threads=1) as target:
        decoder = SpeculativeDecoder(LoadedPair.of(target, head=load_eagle3(draft_path, target)))
        for text in CHAT_PROMPTS:
            prompt = target.tokenize(text)
            plain = run(decoder, prompt, mode="plain", max_tokens=200)
            spec = run(decoder, prompt, mode="eagle3", k=K, max_tokens=200)
            assert spec.tokens == plain.tokens
            assert {0, 1, K} <= {r.accepted for r in spec.rounds}


def test_a_draft_made_for_another_width_of_target_is_refused(
    files: dict[str, Path], target: LlamaModel, tmp_path: Path
) -> None:
    narrow = write_tiny_eagle3(tmp_path / "narrow.gguf", target=TinySpec(seed=1, n_embd=32))
    n_past = target.n_past
    with pytest.raises(ModelLoadError, match="32 wide, the target writes 64"):
        load_eagle3(narrow, target)
    assert target.n_past == n_past  # refused before it touched the target's cache
