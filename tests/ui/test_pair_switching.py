"""A broken pair never replaces a working one: validated before it is listed, loaded beside the
pair in use, never remembered, and at start the last pair that loaded is the fallback."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytestqt.qtbot import QtBot

from specchat import settings as cfg
from specchat.settings import Settings
from specchat.tinymodels import TinyModels
from specchat.ui.pairs.model_picker import LocalPair
from specchat.ui.pairs.pair_memory import RememberedPair, custom_pairs, good_pairs

Maker = Callable[..., Any]


def truncated(source: Path, path: Path) -> Path:
    """A copy of `source` cut in half: its header is whole, its tensor data is not."""
    data = source.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def _choose(qtbot: QtBot, window: Any, choice: LocalPair, *, ok: bool) -> object:
    signal = window.model_loaded if ok else window.error_shown
    with qtbot.waitSignal(signal, timeout=30_000) as blocker:
        window._on_pair_chosen(choice)
    return blocker.args[0]


def test_a_broken_pair_keeps_the_working_one_loaded_and_is_not_remembered(
    qtbot: QtBot, make_window: Maker, tiny_models: TinyModels, tmp_path: Path
) -> None:
    broken = truncated(tiny_models.target, tmp_path / "broken.gguf")
    window = make_window()
    window.settings.set(cfg.MAX_TOKENS, 8)
    good = LocalPair("good pair", tiny_models.target, tiny_models.draft_close)
    _choose(qtbot, window, good, ok=True)

    message = _choose(qtbot, window, LocalPair("broken", broken, None), ok=False)

    assert isinstance(message, str) and "Still using good pair." in message
    assert window.loader.loaded is not None and window.loader.loaded.label == "good pair"
    assert window.controls.pair_label.text() == "good pair"
    assert window.chat_pane.send_button.isEnabled()
    with qtbot.waitSignal(window.answer_done, timeout=30_000) as done:
        assert window.send("still there?")
    assert done.args[0].stats is not None  # answered by the pair that stayed loaded
    # At the next start the pair that worked is loaded, not the broken choice.
    assert Settings().get(cfg.CUSTOM_TARGET) == str(tiny_models.target)
    assert [p.target for p in good_pairs(Settings())] == [tiny_models.target]


def test_at_start_a_pair_that_broke_falls_back_to_the_last_that_loaded(
    qtbot: QtBot, make_window: Maker, tiny_models: TinyModels, tmp_path: Path
) -> None:
    later = tmp_path / "later.gguf"
    later.write_bytes(tiny_models.target.read_bytes())
    first = make_window()
    _choose(qtbot, first, LocalPair("first", tiny_models.target, None), ok=True)
    _choose(qtbot, first, LocalPair("later", later, None), ok=True)
    first.close()
    truncated(tiny_models.target, later)  # the file in use broke between two starts

    window = make_window()
    errors: list[str] = []
    window.error_shown.connect(errors.append)
    with qtbot.waitSignal(window.model_loaded, timeout=30_000) as loaded:
        window.load_from_settings()

    assert loaded.args[0].info.target.path == tiny_models.target
    assert errors and "the last pair that worked" in errors[0]
    assert "later.gguf" in errors[0]


def test_every_custom_pair_is_remembered(
    qtbot: QtBot, make_window: Maker, tiny_models: TinyModels
) -> None:
    window = make_window()
    _choose(qtbot, window, LocalPair("a", tiny_models.target, tiny_models.draft_close), ok=True)
    _choose(qtbot, window, LocalPair("b", tiny_models.target, tiny_models.draft_far), ok=True)
    remembered = custom_pairs(Settings())
    assert [(p.target, p.draft) for p in remembered] == [
        (tiny_models.target, tiny_models.draft_close),
        (tiny_models.target, tiny_models.draft_far),
    ]
    assert remembered[0].same_as(
        RememberedPair(target=tiny_models.target, draft=tiny_models.draft_close)
    )
