"""Tests for choosing a chat template: the file's own, else its family's, said to be a guess."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from specchat.engine.session import ChatEngine
from specchat.engine.templates.chat_template import ChatMessage
from specchat.engine.templates.family import choose_template
from specchat.tinymodels import GEMMA_SPECIAL_TOKENS, TinyModels, TinySpec, write_tiny_model

MESSAGES = [ChatMessage("system", "Be brief."), ChatMessage("user", "hi")]


@pytest.fixture(scope="module")
def gemma_like(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A template-less model with Gemma's special tokens (its turn markers user-defined)."""
    return write_tiny_model(
        tmp_path_factory.mktemp("gemma") / "gemma-like.gguf",
        TinySpec(
            chat_template=None,
            special_tokens=GEMMA_SPECIAL_TOKENS,
            special_type=4,
            eos_id=1,
            name="gemma-like",
        ),
    )


@pytest.fixture(scope="module")
def gemma_engine(gemma_like: Path) -> Iterator[ChatEngine]:
    engine = ChatEngine.load(gemma_like, n_ctx=512)
    yield engine
    engine.close()


def test_a_template_less_gemma_gets_gemma_turns_not_chatml(gemma_engine: ChatEngine) -> None:
    prompt = gemma_engine.render(MESSAGES)
    assert (
        prompt == "<bos><start_of_turn>user\nBe brief.\n\nhi<end_of_turn>\n<start_of_turn>model\n"
    )
    assert "<|im_start|>" not in prompt
    info = gemma_engine.info
    assert info.template_guessed
    assert "Gemma" in info.template_note and "guessed" in info.template_note


def test_gemma_markers_are_never_text_and_end_of_turn_stops(gemma_engine: ChatEngine) -> None:
    target = gemma_engine.target
    start = target.single_token("<start_of_turn>")
    end = target.single_token("<end_of_turn>")
    assert start is not None and end is not None
    # A user-defined token would otherwise be spelt out in the answer.
    assert target.piece(start) == b""
    assert target.piece(end) == b""
    assert target.is_eog(end)
    assert gemma_engine.stop_texts == ()


def test_the_file_s_own_template_is_used_and_named(tiny_models: TinyModels) -> None:
    engine = ChatEngine.load(tiny_models.target, n_ctx=512)
    try:
        assert not engine.info.template_guessed
        assert engine.info.template_note == "Chat template: ChatML (from the file)"
        assert engine.render(MESSAGES).startswith("<|im_start|>system\nBe brief.<|im_end|>")
    finally:
        engine.close()


def test_an_unknown_family_gets_chatml_with_a_warning_and_stops_on_its_text(
    tmp_path: Path,
) -> None:
    path = write_tiny_model(
        tmp_path / "plain.gguf",
        TinySpec(chat_template=None, special_tokens=("<s>", "</s>"), eos_id=1, name="plain"),
    )
    engine = ChatEngine.load(path, n_ctx=512)
    try:
        assert engine.info.template_guessed
        assert "not recognised" in engine.info.template_note
        # "<|im_end|>" is no token here: the answer can only be stopped at its text.
        assert engine.stop_texts == ("<|im_end|>",)
    finally:
        engine.close()


@pytest.mark.parametrize(
    ("architecture", "tokens", "family"),
    [
        ("gemma3", set(), "gemma"),
        ("llama", {"<|start_header_id|>", "<|eot_id|>"}, "llama3"),
        ("phi3", set(), "phi3"),
        ("llama", {"<|user|>", "<|assistant|>", "<|end|>"}, "phi3"),
        ("qwen2", set(), "chatml"),
        ("llama", {"[INST]", "[/INST]"}, "mistral"),
    ],
)
def test_families_by_vocabulary_then_architecture(
    architecture: str, tokens: set[str], family: str
) -> None:
    choice = choose_template(None, architecture=architecture, has_token=tokens.__contains__)
    assert choice.guessed
    assert choice.family is not None and choice.family.key == family


@pytest.mark.parametrize("key", ["gemma", "llama3", "phi3", "chatml", "mistral"])
def test_every_family_template_renders_a_conversation(key: str) -> None:
    from specchat.engine.templates.chat_template import render_chat
    from specchat.engine.templates.family import FAMILIES

    family = next(f for f in FAMILIES if f.key == key)
    conversation = [*MESSAGES, ChatMessage("assistant", "hello"), ChatMessage("user", "bye")]
    text = render_chat(family.source, conversation, bos_token="<B>", eos_token="<E>")
    assert "Be brief." in text and "hello" in text and text.count("bye") == 1
