"""End to end on the real default pair: one question, a coloured answer, α shown."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pytestqt.qtbot import QtBot

from specchat import settings as cfg
from specchat.engine.types import StopReason, TokenKind
from specchat.ui.chat.answer import AnswerDone
from specchat.ui.panels.figures import MIN_SPEEDUP_TOKENS
from specchat.ui.window.main_window import MainWindow

pytestmark = [pytest.mark.real_model, pytest.mark.slow]


def test_real_pair_answers_in_colour(
    qtbot: QtBot, make_window: Any, real_pair: tuple[Path, Path]
) -> None:
    target, draft = real_pair
    window: MainWindow = make_window()
    window.settings.set(cfg.MAX_TOKENS, 24)  # short: the 1.5B is slow on a small CPU
    window.show()
    with qtbot.waitSignal(window.model_loaded, timeout=300_000) as blocker:
        window.load_files(target, draft, label="default pair")
    loaded = blocker.args[0]
    assert loaded.info.draft is not None
    assert loaded.baseline is not None and loaded.baseline.tokens_per_s > 0
    window.controls.set_mode("draft")
    window.controls.k_slider.setValue(4)
    rounds: list[Any] = []
    window.service.round_ready.connect(rounds.append)
    with qtbot.waitSignal(window.answer_done, timeout=300_000) as blocker:
        assert window.send("What is the capital of France? Answer in one short sentence.")
    done: AnswerDone = blocker.args[0]
    assert done.stop in (StopReason.EOS, StopReason.MAX_TOKENS)
    answer = window.chat_view.answer_markdown()
    assert "Paris" in answer
    kinds = {kind for _text, kind, _event in window.chat_view.painted_spans()}
    assert TokenKind.ACCEPTED in kinds  # a same-family draft gets tokens accepted
    stats = rounds[-1].result.stats
    assert window.stats_panel.gauge.value == pytest.approx(stats.alpha)
    assert window.stats_panel.label_text("counts") == f"{stats.accepted} / {stats.drafted}"
    # A one-sentence answer is too short to measure a speed-up on: "—", and the note says why.
    if stats.emitted < MIN_SPEEDUP_TOKENS:
        assert window.stats_panel.label_text("speedup") == "—"
        assert "too short" in window.stats_panel.speed_note.text()
    else:
        assert window.stats_panel.label_text("speedup").endswith("×")
