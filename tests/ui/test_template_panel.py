"""The side panel says which chat template a pair speaks, and warns when it is a guess."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytestqt.qtbot import QtBot

from specchat.tinymodels import GEMMA_SPECIAL_TOKENS, TinyModels, TinySpec, write_tiny_model


def _load(qtbot: QtBot, window: Any, target: Path) -> None:
    with qtbot.waitSignal(window.model_loaded, timeout=30_000):
        window.load_files(target, None, label="pair")


def test_a_guessed_template_is_named_with_a_warning(
    qtbot: QtBot, make_window: Callable[..., Any], tmp_path: Path
) -> None:
    gemma = write_tiny_model(
        tmp_path / "gemma-like.gguf",
        TinySpec(chat_template=None, special_tokens=GEMMA_SPECIAL_TOKENS, special_type=4, eos_id=1),
    )
    window = make_window()
    _load(qtbot, window, gemma)
    detail = window.controls.pair_detail.text()
    assert "⚠ Chat template: Gemma, guessed" in detail


def test_the_file_s_own_template_is_named_without_a_warning(
    qtbot: QtBot, make_window: Callable[..., Any], tiny_models: TinyModels
) -> None:
    window = make_window()
    _load(qtbot, window, tiny_models.target)
    detail = window.controls.pair_detail.text()
    assert "Chat template: ChatML (from the file)" in detail
    assert "⚠" not in detail
