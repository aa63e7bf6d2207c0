"""Tiny models with a 2026 family's real tokenizer and template: llama.cpp tokenizes with them
as its own tokenizer tests expect, marks turns, thinking and tool calls as single special
tokens, ends answers at the family's end of turn, and reads the publisher's template."""

from __future__ import annotations

from pathlib import Path

import pytest

from specchat.engine.llamacpp.model import LlamaModel
from specchat.models.gguf_reader import read_metadata
from specchat.tinyarch.real_vocab import GEMMA4_CHAT, QWEN35_CHAT, RealChatFiles, RealTokenizer
from tests.conftest import RealChatModels
from tests.helpers.vendored_llama import llama_source, tokenizer_cases

#: The markers each family's template and output use, every one a token of its own.
MARKERS = {
    "qwen35": ("<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>"),
    "gemma4": ("<|turn>", "<turn|>", "<|channel>", "<channel|>", "<|tool_call>", '<|"|>'),
}
FILES = {"qwen35": QWEN35_CHAT, "gemma4": GEMMA4_CHAT}


def _path(models: RealChatModels, family: str) -> Path:
    return models.qwen35 if family == "qwen35" else models.gemma4


@pytest.mark.parametrize("family", ["qwen35", "gemma4"])
def test_the_tiny_model_tokenizes_as_llama_cpps_tokenizer_cases_expect(
    real_chat_models: RealChatModels, family: str
) -> None:
    files: RealChatFiles = FILES[family]
    cases = tokenizer_cases(llama_source() / "models" / files.vocab)
    assert len(cases) >= 40
    with LlamaModel(_path(real_chat_models, family), n_ctx=256, n_threads=1) as model:
        parted = [
            text
            for text, expected in cases
            if model.tokenize(text, parse_special=False) != expected
        ]
    assert parted == []


@pytest.mark.parametrize("family", ["qwen35", "gemma4"])
def test_chat_markers_are_single_tokens_and_the_turn_end_ends_an_answer(
    real_chat_models: RealChatModels, family: str
) -> None:
    with LlamaModel(_path(real_chat_models, family), n_ctx=256, n_threads=1) as model:
        for marker in MARKERS[family]:
            tokens = model.tokenize(marker)
            assert len(tokens) == 1, marker
            assert model.piece(tokens[0]) in (b"", marker.encode())
        (end,) = model.tokenize(FILES[family].end_of_turn)
        assert model.is_eog(end)


@pytest.mark.parametrize("family", ["qwen35", "gemma4"])
def test_the_file_carries_the_publishers_template(
    real_chat_models: RealChatModels, family: str
) -> None:
    files = FILES[family]
    published = (llama_source() / "models" / "templates" / files.template).read_text("utf-8")
    meta = read_metadata(_path(real_chat_models, family), keys=["tokenizer.chat_template"])
    assert meta.values["tokenizer.chat_template"] == published


def test_a_file_with_no_tokenizer_is_refused_by_name(tmp_path: Path) -> None:
    import gguf

    path = tmp_path / "no-vocab.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("empty")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    with pytest.raises(ValueError, match=r"no-vocab\.gguf holds no tokenizer"):
        RealTokenizer.read(path)
