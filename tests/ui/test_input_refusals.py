"""Input no answer can come from: the window says why, naming the cause, and keeps the message."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from specchat import settings as cfg
from specchat.settings import Settings
from specchat.tinymodels import TinySpec, write_tiny_model
from specchat.ui.panels.side_panel import control_state

Maker = Callable[..., Any]


def test_a_template_that_renders_nothing_is_named_in_the_banner(
    qtbot: QtBot, make_window: Maker, tmp_path: Path
) -> None:
    model = write_tiny_model(tmp_path / "mute.gguf", TinySpec(chat_template="{{ '' }}"))
    window = make_window()
    window.show()
    with qtbot.waitSignal(window.model_loaded, timeout=30_000):
        window.load_files(model, None, label="mute")
    window.composer.setPlainText("hello")
    with qtbot.waitSignal(window.answer_done, timeout=60_000):
        window.chat_pane.send_button.click()
    assert window.banner.kind == "error"
    said = window.banner.label.text()
    assert "chat template wrote nothing" in said
    assert "Unexpected" not in said
    assert window.composer.toPlainText() == "hello"


@pytest.mark.parametrize(
    "stored",
    [math.nan, math.inf, -math.inf, 99.0, -1.0, 10**400],
    ids=["nan", "inf", "-inf", "99", "-1", "10**400"],
)
def test_a_stored_temperature_no_answer_can_use_reads_as_the_default(
    home: Path, stored: float
) -> None:
    settings = Settings()
    settings.path.parent.mkdir(parents=True, exist_ok=True)
    # json writes NaN and Infinity, and reads them back as floats: a hand-edited file can
    settings.path.write_text(json.dumps({cfg.TEMPERATURE.key: stored, cfg.TOP_P.key: stored}))
    settings = Settings()
    assert settings.get(cfg.TEMPERATURE) == cfg.TEMPERATURE.default
    assert settings.get(cfg.TOP_P) == cfg.TOP_P.default
    assert control_state(settings).sampling.temperature == cfg.TEMPERATURE.default
    with pytest.raises(ValueError, match=r"sampling\.temperature cannot be"):
        settings.set(cfg.TEMPERATURE, stored)


@pytest.mark.parametrize("stored", [0, -3, 17, 10**9], ids=["0", "-3", "17", "10**9"])
def test_a_stored_draft_length_off_the_slider_reads_as_the_default(home: Path, stored: int) -> None:
    settings = Settings()
    settings.path.parent.mkdir(parents=True, exist_ok=True)
    settings.path.write_text(json.dumps({cfg.K.key: stored, cfg.MAX_TOKENS.key: -abs(stored)}))
    settings = Settings()
    assert settings.get(cfg.K) == cfg.K.default
    assert settings.get(cfg.MAX_TOKENS) == cfg.MAX_TOKENS.default
    assert control_state(settings).k == cfg.K.default
    with pytest.raises(ValueError, match=r"drafting\.k cannot be"):
        settings.set(cfg.K, stored)
