"""The picker lists only files llama.cpp will load, and every local pair the user added."""

from __future__ import annotations

from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from specchat.settings import Settings
from specchat.ui.pairs.model_picker import ModelPicker
from specchat.ui.pairs.pair_memory import RememberedPair, remember_custom
from specchat.workers.download_payloads import LocalChecked
from tests.ui import test_model_picker as picker_tests
from tests.ui.test_model_picker import Env
from tests.ui.test_pair_switching import truncated

# The picker's fixtures (a fake hub serving the tiny pair, pickers on a private home).
env = picker_tests.env
make_picker = picker_tests.make_picker


def test_a_truncated_local_gguf_is_refused_not_listed_ready(  # type: ignore[no-untyped-def]
    qtbot: QtBot, make_picker, env: Env, tmp_path: Path
) -> None:
    broken = truncated(env.tiny.target, tmp_path / "cut.gguf")
    picker = make_picker()
    rows = picker.tree.topLevelItemCount()
    with qtbot.waitSignal(picker.service.local_checked, timeout=10_000) as blocker:
        picker.add_local(broken, env.tiny.draft_close)
    checked: LocalChecked = blocker.args[0]
    assert not checked.ok and "truncated" in checked.reason
    assert picker.tree.topLevelItemCount() == rows
    assert picker.details.message.property("error") is True


def test_every_remembered_custom_pair_is_listed(  # type: ignore[no-untyped-def]
    qtbot: QtBot, make_picker, env: Env
) -> None:
    settings = Settings()
    remember_custom(settings, RememberedPair(target=env.tiny.target, draft=env.tiny.draft_close))
    remember_custom(settings, RememberedPair(target=env.tiny.target, draft=env.tiny.draft_far))
    picker = make_picker()
    checked: list[LocalChecked] = []
    picker.service.local_checked.connect(checked.append)
    qtbot.waitUntil(lambda: len(checked) == 2, timeout=10_000)
    names = [picker.tree.topLevelItem(i).text(0) for i in range(picker.tree.topLevelItemCount())]
    assert "Local: tiny-target + tiny-draft-close" in names
    assert "Local: tiny-target + tiny-draft-far" in names


def test_a_random_bytes_gguf_is_refused_before_asking_for_a_draft(  # type: ignore[no-untyped-def]
    qtbot: QtBot, make_picker, env: Env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    noise = tmp_path / "noise.gguf"
    noise.write_bytes(bytes(range(256)) * 64)
    asked: list[str] = []
    monkeypatch.setattr(
        "specchat.ui.pairs.model_picker.QFileDialog.getOpenFileName",
        lambda *a, **k: (str(noise), ""),
    )

    def question(*args: object, **kw: object) -> object:
        asked.append(str(args[2]))
        raise AssertionError("asked about a draft for a file that is no model")

    monkeypatch.setattr("specchat.ui.pairs.model_picker.QMessageBox.question", question)
    picker: ModelPicker = make_picker()
    picker._on_add_local_clicked()
    assert asked == []
    text = picker.details.message.text()
    assert text.startswith("Refused: the target noise.gguf cannot be used: not a GGUF file")
    assert "b'" not in text and "\\x" not in text  # no Python bytes value


def test_a_downloaded_pair_whose_file_broke_is_damaged_not_ready(  # type: ignore[no-untyped-def]
    qtbot: QtBot, make_picker, env: Env
) -> None:
    from tests.helpers.tiny_catalog import PAIR_ID

    picker = make_picker()
    picker.select(PAIR_ID)
    with qtbot.waitSignal(
        picker.service.surveyed,
        timeout=30_000,
        check_params_cb=lambda s: s.pair_id == PAIR_ID and s.ready,
    ):
        picker.start_download()
    blob = next(p for p in env.cache.rglob(env.tiny.target.name)).resolve()
    data = blob.read_bytes()
    blob.write_bytes(data[: len(data) // 2])
    with qtbot.waitSignal(
        picker.service.surveyed,
        timeout=10_000,
        check_params_cb=lambda s: s.pair_id == PAIR_ID,
    ) as surveyed:
        picker.service.survey((PAIR_ID,))
    status = surveyed.args[0]
    assert status.damaged and not status.ready and "truncated" in status.reason
    assert picker.status_text(PAIR_ID) == "Damaged"
    assert not picker.use_button.isEnabled()
