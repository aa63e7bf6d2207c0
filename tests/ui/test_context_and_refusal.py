"""The context size is offered in the panel with its memory cost; a refused message goes back
to the composer; a new chat clears the banner."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pytestqt.qtbot import QtBot

from specchat import settings as cfg
from specchat.settings import Settings
from specchat.tinymodels import TinyModels
from specchat.ui.panels.memory_section import MemorySection
from tests.ui.conftest import load_tiny

Maker = Callable[..., Any]


def test_context_cost_follows_the_choice(qtbot: QtBot) -> None:
    section = MemorySection(n_ctx=4096)
    qtbot.addWidget(section)
    section.set_loaded(n_ctx=4096, kv_bytes_per_token=40 * 1024)
    assert section.cost_label.text() == "KV cache ≈ 160 MiB (target + draft)"
    section.context_box.setCurrentIndex(section.context_box.findData(8192))
    assert section.cost_label.text() == "KV cache ≈ 320 MiB (target + draft) · Reload to apply"
    assert section.summary() == "8,192 tokens ≈ 320 MiB"


def test_context_size_from_the_panel_applies_on_reload(
    qtbot: QtBot, make_window: Maker, tiny_models: TinyModels
) -> None:
    window = make_window()
    window.show()
    loaded = load_tiny(qtbot, window, tiny_models)
    assert loaded.info.target.kv_bytes_per_token > 0
    memory = window.controls.memory
    assert str(loaded.info.target.n_ctx) in window.controls.memory_fold.summary.text().replace(
        ",", ""
    )
    memory.context_box.setCurrentIndex(memory.context_box.findData(2048))
    assert "Reload to apply" in memory.cost_label.text()
    with qtbot.waitSignal(window.model_loaded, timeout=30_000) as blocker:
        window.controls.reload_button.click()
    assert blocker.args[0].info.target.n_ctx == 2048
    assert window.settings.get(cfg.N_CTX) == 2048
    assert "Reload" not in memory.cost_label.text()


def test_a_refused_message_stays_in_the_composer(
    qtbot: QtBot, make_window: Maker, tiny_models: TinyModels
) -> None:
    Settings().set(cfg.N_CTX, 256)  # saved before the window starts: offered in the panel
    window = make_window()
    window.show()
    assert load_tiny(qtbot, window, tiny_models).info.target.n_ctx == 256
    long_message = "Please read all of this carefully. " * 80
    window.composer.setPlainText(long_message)
    with qtbot.waitSignal(window.answer_done, timeout=60_000):
        window.chat_pane.send_button.click()
    assert window.composer.toPlainText() == long_message.strip()
    assert window.chat_view.message_count() == 0
    conversation = window._conversation_id
    assert conversation is not None and window.store.messages(conversation) == []
    assert window.banner.isVisible() and window.banner.kind == "error"
    assert "message. Your message was not sent: it is back in the message box." in (
        window.banner.label.text()
    )
    assert window.status_line.status_label.text() == "Message not sent."
    window.new_conversation()
    assert not window.banner.isVisible()


def test_context_cost_counts_recurrent_state_copies(qtbot: QtBot) -> None:
    section = MemorySection(n_ctx=4096)
    qtbot.addWidget(section)
    section.set_loaded(n_ctx=4096, kv_bytes_per_token=40 * 1024, state_bytes=100 << 20)
    assert section.cost_label.text() == (
        "KV cache ≈ 260 MiB (target + draft), 100 MiB of it recurrent state copies"
    )
    assert section.summary() == "4,096 tokens ≈ 260 MiB"


def test_a_hybrid_target_says_its_answers_can_part_at_near_ties(qtbot: QtBot) -> None:
    section = MemorySection(n_ctx=4096)
    qtbot.addWidget(section)
    section.set_loaded(n_ctx=4096, kv_bytes_per_token=1024, key_type="Q8_0", near_ties="Hybrid.")
    assert section.cache_note.text() == "Hybrid. Loaded: Q8_0 keys."
    section.set_loaded(n_ctx=4096, kv_bytes_per_token=1024, key_type="Q8_0")
    assert section.cache_note.text().startswith("Speculative answers equal plain ones exactly")
