"""Rough edges of the window: model sizes, the status line, rename, same titles, regenerate."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytestqt.qtbot import QtBot

from specchat import settings as cfg
from specchat.engine.llamacpp.model_size import format_params, sized_description
from specchat.tinymodels import TinyModels, TinySpec, write_tiny_model
from specchat.ui.chat.regenerate_hint import WARMER
from tests.ui.conftest import load_tiny

Maker = Callable[..., Any]


def test_the_pair_panel_names_the_file_s_size_not_llama_cpp_s_class(
    qtbot: QtBot, make_window: Maker, tmp_path: Path
) -> None:
    draft = write_tiny_model(tmp_path / "d.gguf", TinySpec(size_label="0.5B", name="d"))
    target = write_tiny_model(tmp_path / "t.gguf", TinySpec(name="t"))
    window = make_window()
    with qtbot.waitSignal(window.model_loaded, timeout=30_000):
        window.load_files(target, draft, label="pair")
    detail = window.controls.pair_detail.text()
    assert "Draft: llama 0.5B all F32" in detail
    assert "?B" not in detail  # the target has no size label: its parameter count instead
    assert sized_description("qwen2 1B Q4_K - Medium", size_label="0.5B", n_params=0) == (
        "qwen2 0.5B Q4_K - Medium"
    )
    assert format_params(494_032_768) == "494M" and format_params(1_543_714_304) == "1.5B"


def test_the_status_line_says_how_the_answer_ended_in_words(
    qtbot: QtBot, make_window: Maker, tiny_models: TinyModels
) -> None:
    window = make_window()
    window.settings.set(cfg.MAX_TOKENS, 6)
    load_tiny(qtbot, window, tiny_models)
    with qtbot.waitSignal(window.answer_done, timeout=30_000):
        window.send("hi")
    text = window.status_line.status_label.text()
    assert text.startswith(("Answer finished", "Answer cut at the token limit")), text
    assert "end of answer" not in text and "Answer token" not in text


def _conversation(window: Any, title: str) -> int:
    conversation = window.store.create(title)
    window.store.add_message(conversation.id, "user", f"message of {conversation.id}")
    window.conversation_list.refresh()
    return int(conversation.id)


def test_renaming_another_conversation_keeps_the_open_one_highlighted(
    qtbot: QtBot, make_window: Maker
) -> None:
    window = make_window()
    first, second = _conversation(window, "first"), _conversation(window, "second")
    window.open_conversation(first)
    listing = window.conversation_list
    # A right-click makes the clicked row Qt's current one before the context menu opens.
    listing.list.setCurrentRow(listing.ids().index(second))
    listing.rename(second, "renamed")
    assert listing.current_id() == first
    assert "message of " + str(first) in window.chat_view.toPlainText()


def test_conversations_with_one_title_show_when_they_started(
    qtbot: QtBot, make_window: Maker
) -> None:
    window = make_window()
    _conversation(window, "Hello there")
    _conversation(window, "Hello there")
    _conversation(window, "Other")
    listing = window.conversation_list.list
    texts = [listing.item(i).text() for i in range(listing.count())]
    repeated = [t for t in texts if t.startswith("Hello there")]
    assert len(repeated) == 2 and all(" · " in t and ":" in t for t in repeated)
    assert "Other" in texts


def test_regenerating_at_temperature_0_says_why_and_offers_a_warmer_try(
    qtbot: QtBot, make_window: Maker, tiny_models: TinyModels
) -> None:
    window = make_window()
    window.show()
    window.settings.set(cfg.MAX_TOKENS, 6)
    load_tiny(qtbot, window, tiny_models)
    with qtbot.waitSignal(window.answer_done, timeout=30_000):
        window.send("hi")
    assert window.controls.state().sampling.temperature == 0
    with qtbot.waitSignal(window.answer_done, timeout=30_000):
        assert window.regenerate()
    banner = window.banner
    assert banner.isVisible() and "temperature 0" in banner.label.text()
    assert banner.action_button.isVisible()
    assert banner.action_button.text() == f"Regenerate with temperature {WARMER}"
    with qtbot.waitSignal(window.answer_done, timeout=30_000):
        banner.action_button.click()
    assert window.controls.state().sampling.temperature == WARMER
    assert not banner.isVisible()  # a warm regenerate needs no note
