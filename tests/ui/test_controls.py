"""The K slider is the user's: auto shows its own K beside it, never in it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytestqt.qtbot import QtBot

from specchat import settings as cfg
from specchat.engine.types import Controls
from specchat.settings import Settings
from specchat.tinyarch import write_tiny_qwen35
from specchat.tinymodels import TinyModels
from specchat.ui.panels.controls import ControlsPanel
from specchat.ui.window.window_state import save_controls
from tests.ui.conftest import load_tiny

Maker = Callable[..., Any]


def _panel(qtbot: QtBot, mode: str = "draft", k: int = 6) -> ControlsPanel:
    panel = ControlsPanel(state=Controls(mode, k))
    qtbot.addWidget(panel)
    return panel


def test_auto_choice_is_shown_beside_the_slider_never_written_into_it(
    qtbot: QtBot, home: object
) -> None:
    panel = _panel(qtbot)
    panel.set_mode("auto")
    panel.show_policy_k(1, "lookup, K = 1: short match")
    assert panel.k_slider.value() == 6
    assert panel.k_auto.text() == "auto: 1"
    assert not panel.k_auto.isHidden()
    panel.show_policy_k(0, "plain: nothing pays")
    assert panel.k_auto.text() == "auto: plain"
    assert panel.k_slider.value() == 6
    panel.set_mode("draft")
    assert panel.state().k == 6
    assert panel.k_auto.isHidden()
    settings = Settings()
    save_controls(settings, panel)
    assert settings.get(cfg.K) == 6


def test_slider_and_value_are_disabled_where_k_does_nothing(qtbot: QtBot) -> None:
    panel = _panel(qtbot)
    for mode in ("plain", "auto"):
        panel.set_mode(mode)
        assert not panel.k_slider.isEnabled()
        assert not panel.k_value.isEnabled()
        # The label agrees with the handle: never "0" beside a handle at 6.
        assert panel.k_value.text() == str(panel.k_slider.value()) == "6"
    panel.set_mode("lookup")
    assert panel.k_slider.isEnabled() and panel.k_value.isEnabled()
    assert panel.k_value.text() == "6"


def test_policy_line_shows_only_in_auto(
    qtbot: QtBot, make_window: Maker, tiny_models: TinyModels
) -> None:
    window = make_window()
    window.settings.set(cfg.MAX_TOKENS, 40)
    window.show()
    load_tiny(qtbot, window, tiny_models)
    window.controls.set_mode("auto")
    with qtbot.waitSignal(window.answer_done, timeout=60_000):
        assert window.send("Hello there")
    assert window.stats_panel.policy.text().startswith("Auto policy: ")
    window.controls.set_mode("draft")
    assert window.stats_panel.policy.text() == ""
    # The K the user chose survives the auto answer.
    assert window.controls.state().k == 4
    with qtbot.waitSignal(window.answer_done, timeout=60_000):
        assert window.send("And again")
    assert window.stats_panel.policy.text() == ""


def test_modes_the_loaded_pair_cannot_serve_are_greyed(
    qtbot: QtBot, make_window: Maker, tiny_models: TinyModels, tmp_path: Path
) -> None:
    window = make_window()
    box = window.controls.mode_box

    def enabled(name: str) -> bool:
        return bool(box.model().item(box.findData(name)).isEnabled())

    assert enabled("mtp") and enabled("draft")  # nothing loaded: nothing greyed
    load_tiny(qtbot, window, tiny_models)
    assert enabled("draft") and enabled("lookup") and enabled("auto") and enabled("plain")
    assert not enabled("mtp") and not enabled("assistant")
    assert box.model().item(box.findData("mtp")).toolTip()
    hybrid = write_tiny_qwen35(tmp_path / "hybrid.gguf", mtp=True)
    with qtbot.waitSignal(window.model_loaded, timeout=30_000):
        window.load_files(hybrid, None, label="hybrid")
    assert enabled("mtp") and not enabled("draft")
    assert "MTP head" in window.controls.pair_detail.text()
