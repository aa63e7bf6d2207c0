"""The verdict on a pair's files for its drafter: an MTP head in the target, an assistant made
for the target's architecture, a draft model's vocabulary."""

from __future__ import annotations

from pathlib import Path

from specchat.models.drafter_check import check_drafter
from specchat.models.drafter_kinds import DrafterKind
from specchat.tinymodels import TinyModels
from tests.helpers.drafter_files import write_bare_model, write_mtp_target


def test_a_target_carrying_an_mtp_head_can_draft_for_itself(tmp_path: Path) -> None:
    target = write_mtp_target(tmp_path / "mtp.gguf")
    verdict = check_drafter(DrafterKind.MTP, target, None)
    assert verdict.ok
    assert verdict.reason == "the target carries an MTP head (llama.nextn_predict_layers = 1)"


def test_a_target_converted_without_its_head_cannot(
    tiny_models: TinyModels, tmp_path: Path
) -> None:
    verdict = check_drafter(DrafterKind.MTP, tiny_models.target, None)
    assert not verdict.ok and "no MTP head (llama.nextn_predict_layers" in verdict.reason
    zero = write_mtp_target(tmp_path / "zero.gguf", layers=0)
    assert not check_drafter(DrafterKind.MTP, zero, None).ok


def test_an_assistant_for_the_targets_architecture_is_accepted(tmp_path: Path) -> None:
    target = write_bare_model(tmp_path / "gemma4.gguf", "gemma4")
    assistant = write_bare_model(tmp_path / "assistant.gguf", "gemma4-assistant")
    verdict = check_drafter(DrafterKind.ASSISTANT, target, assistant)
    assert verdict.ok and "gemma4-assistant" in verdict.reason


def test_assistants_llama_cpp_would_not_load_or_pair_are_refused(
    tiny_models: TinyModels, tmp_path: Path
) -> None:
    gemma4 = write_bare_model(tmp_path / "gemma4.gguf", "gemma4")
    underscore = write_bare_model(tmp_path / "u.gguf", "gemma4_assistant")
    verdict = check_drafter(DrafterKind.ASSISTANT, gemma4, underscore)
    assert not verdict.ok
    assert verdict.reason == (
        "the assistant's architecture is spelled 'gemma4_assistant'; llama.cpp reads "
        "'gemma4-assistant'"
    )
    # A draft model is no assistant.
    verdict = check_drafter(DrafterKind.ASSISTANT, gemma4, tiny_models.draft_close)
    assert not verdict.ok and "is a 'llama' model, not an assistant" in verdict.reason
    # An assistant drafts for its own family only.
    assistant = write_bare_model(tmp_path / "a.gguf", "gemma4-assistant")
    verdict = check_drafter(DrafterKind.ASSISTANT, tiny_models.target, assistant)
    assert not verdict.ok and "for a 'gemma4' target, not a 'llama' one" in verdict.reason


def test_a_draft_model_is_checked_by_its_vocabulary(tiny_models: TinyModels) -> None:
    ok = check_drafter(DrafterKind.DRAFT_MODEL, tiny_models.target, tiny_models.draft_close)
    odd = check_drafter(DrafterKind.DRAFT_MODEL, tiny_models.target, tiny_models.odd_vocab)
    assert ok.ok and not odd.ok and "vocabulary" in odd.reason


def test_an_unreadable_file_gives_a_verdict(tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF")
    verdict = check_drafter(DrafterKind.MTP, broken, None)
    assert not verdict.ok and verdict.reason.startswith("cannot read the target (broken.gguf)")
    missing = check_drafter(DrafterKind.ASSISTANT, broken, None)
    assert missing.reason == "the pair's assistant file is missing"
