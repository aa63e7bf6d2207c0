"""Tests for ChatEngine: load checks, chat templates from the file, multi-turn cache reuse."""

from __future__ import annotations

import traceback
from pathlib import Path

import pytest

from specchat.engine.context import ContextOverflowError
from specchat.engine.llamacpp.model import LlamaModel
from specchat.engine.session import ChatEngine, IncompatibleDraftError, LoadProgress
from specchat.engine.templates.chat_template import ChatMessage
from specchat.engine.templates.guards import ChatTemplateError
from specchat.engine.types import Controls, StopReason
from specchat.tinymodels import TinyModels, TinySpec, write_tiny_model
from tests.helpers.engine import answer
from tests.helpers.tiny_recurrent import write_tiny_mamba


def test_load_reports_progress_then_chats_across_turns(tiny_models: TinyModels) -> None:
    seen: list[LoadProgress] = []
    engine = ChatEngine.load(
        tiny_models.target, tiny_models.draft_close, n_ctx=1024, progress=seen.append
    )
    try:
        assert seen[0].stage == "checking"
        assert {"target", "draft"} <= {p.stage for p in seen}
        assert seen[-1].overall == pytest.approx(1.0)
        assert "same" in engine.info.compat_reason
        messages = [
            ChatMessage("system", "you are a tiny model " * 5),
            ChatMessage("user", "hello there"),
        ]
        first = answer(engine, messages, max_tokens=20, controls=Controls("draft", 3))
        assert first[-1].stop in (StopReason.MAX_TOKENS, StopReason.EOS)
        first_prompt = len(engine.prepare(messages, max_tokens=20).tokens)
        assert first[-1].stats.prompt_tokens == first_prompt - 1
        # (A random model's answer does not survive a round trip through text, so the
        # follow-up carries a readable one.)
        messages += [ChatMessage("assistant", "fine, thanks"), ChatMessage("user", "again")]
        second = answer(engine, messages, max_tokens=20, controls=Controls("draft", 3))
        full_prompt = len(engine.prepare(messages, max_tokens=20).tokens)
        # Only the new turn is evaluated: the first turn's KV cache was kept.
        assert 0 < second[-1].stats.prompt_tokens <= full_prompt - first_prompt + 2
    finally:
        engine.close()


def test_incompatible_draft_is_refused_before_loading(tiny_models: TinyModels) -> None:
    with pytest.raises(IncompatibleDraftError, match="vocabulary"):
        ChatEngine.load(tiny_models.target, tiny_models.odd_vocab)


def test_malicious_template_in_the_file_is_refused_on_load(tmp_path: Path) -> None:
    sentinel = tmp_path / "pwned"
    evil = "{{ cycler.__init__.__globals__.os.popen('touch " + str(sentinel) + "').read() }}"
    model = write_tiny_model(tmp_path / "evil.gguf", TinySpec(chat_template=evil))
    with pytest.raises(ChatTemplateError, match="not allowed"):
        ChatEngine.load(model)
    assert not sentinel.exists()


def test_a_refused_template_frees_both_models_at_once(
    tmp_path: Path, tiny_models: TinyModels
) -> None:
    model = write_tiny_model(tmp_path / "evil.gguf", TinySpec(chat_template="{{ ().__class__ }}"))
    with pytest.raises(ChatTemplateError) as caught:
        ChatEngine.load(model, tiny_models.draft_close, n_ctx=256)
    # The traceback keeps the loading frame's models alive: they must be closed already,
    # not left holding their memory until the garbage collector finds them.
    loaded = [
        value
        for frame, _ in traceback.walk_tb(caught.value.__traceback__)
        for value in frame.f_locals.values()
        if isinstance(value, LlamaModel)
    ]
    assert len({id(m) for m in loaded}) == 2
    assert all(m.closed for m in loaded)


def test_a_recurrent_target_drafts(tmp_path: Path) -> None:
    engine = ChatEngine.load(write_tiny_mamba(tmp_path / "mamba.gguf"), n_ctx=256)
    try:
        assert engine.info.drafting_refused == ""
        rounds = answer(
            engine, [ChatMessage("user", "hello")], max_tokens=24, controls=Controls("lookup", k=4)
        )
        assert rounds[-1].stop in (StopReason.MAX_TOKENS, StopReason.EOS)
        assert not any("without drafting" in r.choice.reason for r in rounds)
    finally:
        engine.close()


def test_model_without_template_uses_the_fallback(tmp_path: Path) -> None:
    model = write_tiny_model(tmp_path / "bare.gguf", TinySpec(chat_template=None))
    engine = ChatEngine.load(model, n_ctx=512)
    try:
        # Its vocabulary has ChatML's markers: ChatML, said to be a guess.
        assert engine.template_choice.guessed
        assert engine.template_choice.label == "ChatML"
        text = engine.render([ChatMessage("user", "hi")])
        assert "hi" in text and text.endswith("assistant\n")
    finally:
        engine.close()


def test_long_conversation_drops_oldest_turns(tiny_models: TinyModels) -> None:
    engine = ChatEngine.load(tiny_models.target, n_ctx=256)
    try:
        messages = [ChatMessage("system", "be brief")]
        for i in range(12):
            messages += [
                ChatMessage("user", f"question {i} " * 6),
                ChatMessage("assistant", f"answer {i} " * 6),
            ]
        messages.append(ChatMessage("user", "last question"))
        prepared = engine.prepare(messages, max_tokens=64)
        assert prepared.plan.dropped and 0 not in prepared.plan.dropped
        assert len(prepared.tokens) <= engine.target.n_ctx - 64
        rounds = answer(engine, messages, max_tokens=64, controls=Controls("lookup"))
        assert rounds[-1].stop in (StopReason.MAX_TOKENS, StopReason.EOS)
        with pytest.raises(ContextOverflowError):
            engine.prepare([ChatMessage("user", "word " * 2000)], max_tokens=64)
    finally:
        engine.close()
