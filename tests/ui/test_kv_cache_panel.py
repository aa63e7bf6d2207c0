"""The Context section offers the key cache with its effect; the choice applies on reload."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from specchat import settings as cfg
from specchat.models.optimise import optimise
from specchat.tinymodels import TinySpec, write_tiny_model
from specchat.ui.panels.memory_section import CACHE_EFFECTS

Maker = Callable[..., Any]


@pytest.fixture(scope="module")
def wide_q4_0(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("wide-kv-ui")
    source = write_tiny_model(folder / "wide.gguf", TinySpec(n_head=2, name="tiny-wide-heads"))
    return optimise(source, output=folder / "wide.q4_0.gguf").path


def test_the_key_cache_is_shown_with_its_effect_and_applies_on_reload(
    qtbot: QtBot, make_window: Maker, wide_q4_0: Path
) -> None:
    window = make_window()
    window.show()
    memory = window.controls.memory
    with qtbot.waitSignal(window.model_loaded, timeout=30_000) as blocker:
        window.load_files(wide_q4_0, None, label="wide")
    assert blocker.args[0].info.target.key_type == "Q8_0"
    assert memory.cache_note.text() == CACHE_EFFECTS["q8_0"] + " Loaded: Q8_0 keys."
    assert "Reload" not in memory.cost_label.text()
    memory.cache_box.setCurrentIndex(memory.cache_box.findData("f16"))
    assert memory.cache_note.text() == CACHE_EFFECTS["f16"] + " Loaded: Q8_0 keys."
    assert "Reload to apply" in memory.cost_label.text()
    with qtbot.waitSignal(window.model_loaded, timeout=30_000) as blocker:
        window.controls.reload_button.click()
    assert blocker.args[0].info.target.key_type == "F16"
    assert window.settings.get(cfg.KV_CACHE) == "f16"
    assert memory.cache_note.text().endswith("Loaded: F16 keys.")
    assert "Reload" not in memory.cost_label.text()
