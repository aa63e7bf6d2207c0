"""The model picker against the fake hub: download, cancel and resume, local pairs, keys."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from specchat import paths
from specchat import settings as cfg
from specchat.models import hub_download as download
from specchat.settings import Settings
from specchat.tinymodels import TinyModels
from specchat.ui.pairs.model_picker import BAR_MAX, LocalPair, ModelPicker
from specchat.workers.download_payloads import FileProgress, LocalChecked, PairStatus
from tests.helpers import fake_hub
from tests.helpers.tiny_catalog import ODD_PAIR_ID, PAIR_ID, serve_tiny_pair


@dataclass
class Env:
    hub: fake_hub.FakeHub
    cache: Path
    tiny: TinyModels


@pytest.fixture
def env(
    monkeypatch: pytest.MonkeyPatch, home: Path, tmp_path: Path, tiny_models: TinyModels
) -> Iterator[Env]:
    monkeypatch.setenv("SPECCHAT_MODEL_CACHE", str(tmp_path / "model-cache"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with fake_hub.serve() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        serve_tiny_pair(hub, tiny_models, paths.user_catalog_path())
        yield Env(hub, tmp_path / "hub", tiny_models)


@pytest.fixture
def make_picker(qtbot: QtBot, env: Env) -> Iterator[Callable[..., ModelPicker]]:
    made: list[ModelPicker] = []

    def make(**kw: object) -> ModelPicker:
        kw.setdefault("ask_hub_sizes", False)
        picker = ModelPicker(None, settings=Settings(), **kw)  # type: ignore[arg-type]
        qtbot.addWidget(picker)
        made.append(picker)
        return picker

    yield make
    for picker in made:
        picker.service.shutdown(timeout_s=5.0)


@pytest.fixture
def small_pieces(monkeypatch: pytest.MonkeyPatch, env: Env) -> None:
    """Hand bytes to the file every 16 KiB and serve slowly, so a tiny model can be cut."""
    from huggingface_hub import constants

    monkeypatch.setattr(download, "HUB_CHUNK", 16 * 1024)
    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 16 * 1024)
    env.hub.chunk = 16 * 1024
    env.hub.faults.chunk_delay = 0.05  # ~300 KB/s: seconds for the tiny target


def _status(pair_id: str, test: Callable[[PairStatus], bool]) -> Callable[[PairStatus], bool]:
    return lambda status: status.pair_id == pair_id and test(status)


def _under_way(event: FileProgress) -> bool:
    return event.role == "target" and event.stage == "download" and event.done >= 48 * 1024


def test_lists_the_catalog_with_its_facts(qtbot: QtBot, make_picker, env: Env) -> None:  # type: ignore[no-untyped-def]
    picker = make_picker()
    with qtbot.waitSignal(
        picker.service.surveyed, timeout=20_000, check_params_cb=lambda s: s.pair_id == PAIR_ID
    ):
        pass
    assert PAIR_ID in picker.catalog.ids() and "default" in picker.catalog.ids()
    picker.select(PAIR_ID)
    assert picker.details.title.text() == "Tiny target + close draft"
    assert "F32" in picker.details.file_labels["target"].text()
    assert "mit" in picker.details.file_labels["target"].text()
    assert "not downloaded" in picker.details.file_labels["target"].text()
    assert picker.details.recommended.text() == "draft model mode, K = 5"
    assert picker.status_text(PAIR_ID) == "Not downloaded"
    assert not picker.use_button.isEnabled()


def test_download_fills_the_bars_and_marks_the_pair_ready(
    qtbot: QtBot, make_picker, env: Env
) -> None:  # type: ignore[no-untyped-def]
    picker = make_picker()
    picker.show()
    picker.select(PAIR_ID)
    seen: list[tuple[str, int]] = []

    def on_progress(event: FileProgress) -> None:  # runs after the picker's own slot
        if event.role == "target":
            seen.append((event.stage, picker.details.bars["target"].value()))

    picker.service.progress.connect(on_progress)

    with qtbot.waitSignal(
        picker.service.surveyed, timeout=30_000, check_params_cb=_status(PAIR_ID, lambda s: s.ready)
    ):
        qtbot.mouseClick(picker.details.download_button, Qt.MouseButton.LeftButton)

    downloading = [value for stage, value in seen if stage == "download"]
    assert downloading == sorted(downloading) and downloading[-1] == BAR_MAX
    assert seen[-1] == ("done", BAR_MAX)
    for role in ("target", "draft"):
        bar = picker.details.bars[role]
        assert bar.maximum() == BAR_MAX and bar.value() == BAR_MAX
    assert picker.status_text(PAIR_ID).startswith("Ready")
    checksum = picker.details.checksum.text()
    assert "sha256" in checksum and "matches" in checksum
    assert "✓ compatible" in picker.details.verdict.text()
    assert picker.use_button.isEnabled()
    assert not picker.details.download_button.isEnabled()  # nothing left to do

    # Enter uses the pair.
    with qtbot.waitSignal(picker.pair_chosen, timeout=5_000) as chosen:
        qtbot.keyClick(picker.tree, Qt.Key.Key_Return)
    assert chosen.args == [PAIR_ID]
    assert not picker.isVisible()


def test_cancel_keeps_the_partial_and_a_retry_resumes(  # type: ignore[no-untyped-def]
    qtbot: QtBot, make_picker, env: Env, small_pieces: None
) -> None:
    picker = make_picker()
    picker.select(PAIR_ID)
    with qtbot.waitSignal(picker.service.progress, timeout=30_000, check_params_cb=_under_way):
        picker.start_download()
    assert picker.details.cancel_button.isEnabled()
    assert "downloading" in picker.details.bars["target"].format()

    with qtbot.waitSignal(
        picker.service.surveyed,
        timeout=10_000,
        check_params_cb=_status(PAIR_ID, lambda s: s.partial > 0),
    ) as paused:
        picker.cancel_download(keep_partial=True)

    kept = paused.args[0].target.partial
    assert picker.status_text(PAIR_ID).startswith("Paused")
    assert picker.details.download_button.text() == "Resume download"
    assert "kept" in picker.details.message.text()
    assert 0 < picker.details.bars["target"].value() < BAR_MAX

    env.hub.faults.chunk_delay = 0.0
    with qtbot.waitSignal(
        picker.service.surveyed, timeout=30_000, check_params_cb=_status(PAIR_ID, lambda s: s.ready)
    ):
        qtbot.mouseClick(picker.details.download_button, Qt.MouseButton.LeftButton)

    target_gets = [r for r in env.hub.gets() if env.tiny.target.name in r.path]
    assert target_gets[-1].range == f"bytes={kept}-"  # resumed, not restarted
    assert picker.details.bars["target"].value() == BAR_MAX
    assert picker.status_text(PAIR_ID).startswith("Ready")


def test_cancel_and_delete_removes_the_partial(  # type: ignore[no-untyped-def]
    qtbot: QtBot, make_picker, env: Env, small_pieces: None
) -> None:
    picker = make_picker()
    picker.select(PAIR_ID)
    with qtbot.waitSignal(picker.service.progress, timeout=30_000, check_params_cb=_under_way):
        picker.start_download()
    with qtbot.waitSignal(
        picker.service.surveyed,
        timeout=10_000,
        check_params_cb=_status(PAIR_ID, lambda s: s.partial == 0),
    ):
        picker.cancel_download(keep_partial=False)

    assert not list(env.cache.rglob("*.incomplete"))
    assert picker.status_text(PAIR_ID) == "Not downloaded"
    assert "deleted" in picker.details.message.text()


def test_the_cancel_question_defaults_to_keeping_the_partial(  # type: ignore[no-untyped-def]
    qtbot: QtBot, make_picker, env: Env, small_pieces: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from PySide6.QtWidgets import QMessageBox

    picker = make_picker()
    picker.select(PAIR_ID)
    asked: list[str] = []

    def answer_default(box: QMessageBox) -> int:
        asked.append(box.text())
        box.defaultButton().click()  # what Enter would press
        return 0

    monkeypatch.setattr(QMessageBox, "exec", answer_default)
    with qtbot.waitSignal(picker.service.progress, timeout=30_000, check_params_cb=_under_way):
        picker.start_download()
    with qtbot.waitSignal(picker.service.cancelled, timeout=10_000) as blocker:
        qtbot.mouseClick(picker.details.cancel_button, Qt.MouseButton.LeftButton)

    assert asked and "Keep" in asked[0]
    assert blocker.args[0].kept > 0


def test_incompatible_local_pair_is_refused_with_its_reason(
    qtbot: QtBot, make_picker, env: Env
) -> None:  # type: ignore[no-untyped-def]
    picker = make_picker()
    rows = picker.tree.topLevelItemCount()

    with qtbot.waitSignal(picker.service.local_checked, timeout=10_000) as blocker:
        picker.add_local(env.tiny.target, env.tiny.odd_vocab)

    checked = blocker.args[0]
    assert isinstance(checked, LocalChecked) and not checked.ok
    assert picker.tree.topLevelItemCount() == rows  # not listed
    assert picker.details.message.isVisibleTo(picker)
    assert picker.details.message.text().startswith("Refused tiny-target.gguf + tiny-odd.gguf")
    assert checked.reason in picker.details.message.text()
    assert picker.details.message.property("error") is True


def test_compatible_local_pair_is_listed_and_used(qtbot: QtBot, make_picker, env: Env) -> None:  # type: ignore[no-untyped-def]
    picker = make_picker()
    with qtbot.waitSignal(picker.service.local_checked, timeout=10_000):
        picker.add_local(env.tiny.target, env.tiny.draft_close)
    assert picker.selected_key().startswith("local:")
    assert picker.use_button.isEnabled()
    assert "✓" in picker.details.verdict.text()

    with qtbot.waitSignal(picker.pair_chosen, timeout=5_000) as chosen:
        qtbot.mouseClick(picker.use_button, Qt.MouseButton.LeftButton)

    assert chosen.args == [
        LocalPair("tiny-target + tiny-draft-close", env.tiny.target, env.tiny.draft_close)
    ]


def test_files_already_in_the_hub_cache_are_found_without_downloading(  # type: ignore[no-untyped-def]
    qtbot: QtBot, make_picker, env: Env
) -> None:
    from specchat.models.catalog import load_catalog

    pair = load_catalog().get(PAIR_ID)
    for _role, model in pair.files():
        download.download_from_hub(model, cache_dir=env.cache)  # another tool got them first
    before = len(env.hub.file_requests())

    picker = make_picker()
    with qtbot.waitSignal(
        picker.service.surveyed, timeout=20_000, check_params_cb=_status(PAIR_ID, lambda s: True)
    ) as blocker:
        pass

    assert blocker.args[0].ready
    picker.select(PAIR_ID)
    assert picker.status_text(PAIR_ID).startswith("Ready")
    assert "hub cache" in picker.details.file_labels["target"].text()
    assert picker.use_button.isEnabled()
    assert len(env.hub.file_requests()) == before


def test_not_enough_disk_space_is_refused_before_starting(
    qtbot: QtBot, make_picker, env: Env
) -> None:  # type: ignore[no-untyped-def]
    picker = make_picker(free_space=lambda _path: 10_000)
    picker.select(PAIR_ID)
    with qtbot.waitSignal(picker.service.failed, timeout=10_000):
        picker.start_download()
    assert "not enough disk space" in picker.details.message.text().lower()
    assert picker.status_text(PAIR_ID) == "Failed"
    assert picker.details.download_button.text() == "Retry"
    assert env.hub.gets() == []


def test_an_incompatible_catalog_pair_cannot_be_used(qtbot: QtBot, make_picker, env: Env) -> None:  # type: ignore[no-untyped-def]
    picker = make_picker()
    picker.select(ODD_PAIR_ID)
    with qtbot.waitSignal(
        picker.service.surveyed,
        timeout=30_000,
        check_params_cb=_status(ODD_PAIR_ID, lambda s: s.compatible is not None),
    ):
        picker.start_download()
    assert picker.status_text(ODD_PAIR_ID) == "Incompatible"
    assert "✗ incompatible" in picker.details.verdict.text()
    assert not picker.use_button.isEnabled()


def test_escape_closes_and_stops_the_thread(qtbot: QtBot, make_picker, env: Env) -> None:  # type: ignore[no-untyped-def]
    picker = make_picker()
    picker.show()
    qtbot.waitExposed(picker)
    with qtbot.waitSignal(picker.rejected, timeout=5_000):
        qtbot.keyClick(picker.tree, Qt.Key.Key_Escape)
    assert not picker.isVisible()
    assert picker.service.worker_thread.isFinished()


def test_the_remembered_custom_pair_is_listed_and_selected(  # type: ignore[no-untyped-def]
    qtbot: QtBot, make_picker, env: Env
) -> None:
    settings = Settings()
    settings.set(cfg.PAIR_ID, "custom")
    settings.set(cfg.CUSTOM_TARGET, str(env.tiny.target))
    settings.set(cfg.CUSTOM_DRAFT, str(env.tiny.draft_close))
    picker = make_picker()  # reads the same settings file
    with qtbot.waitSignal(picker.service.local_checked, timeout=10_000):
        pass
    assert picker.selected_key().startswith("local:")  # the remembered custom pair


def test_the_main_window_loads_the_pair_the_picker_chose(  # type: ignore[no-untyped-def]
    qtbot: QtBot, make_window, env: Env
) -> None:
    window = make_window()
    picker = ModelPicker(window, ask_hub_sizes=False)  # as the window's "Models…" makes it
    picker.pair_chosen.connect(window._on_pair_chosen)
    with qtbot.waitSignal(picker.service.local_checked, timeout=10_000):
        picker.add_local(env.tiny.target, env.tiny.draft_close)

    with qtbot.waitSignal(window.model_loaded, timeout=30_000) as loaded:
        qtbot.mouseClick(picker.use_button, Qt.MouseButton.LeftButton)

    assert loaded.args[0].label == "tiny-target + tiny-draft-close"
    assert window.settings.get(cfg.PAIR_ID) == "custom"
    assert window.settings.get(cfg.CUSTOM_DRAFT) == str(env.tiny.draft_close)
    assert picker.service.worker_thread.isFinished()


def test_the_models_button_opens_the_picker_wired_to_the_window(  # type: ignore[no-untyped-def]
    qtbot: QtBot, make_window, env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[ModelPicker] = []

    def fake_exec(picker: ModelPicker) -> int:  # a modal loop would block the test
        opened.append(picker)
        return 0

    monkeypatch.setattr(ModelPicker, "exec", fake_exec)
    window = make_window()
    window.controls.models_button.click()

    [picker] = opened
    assert picker.parent() is window
    with qtbot.waitSignal(window.model_loaded, timeout=30_000):
        picker.pair_chosen.emit(LocalPair("tiny", env.tiny.target, env.tiny.draft_close))
    picker.reject()
    assert picker.service.worker_thread.isFinished()


def test_importing_the_picker_imports_neither_the_hub_nor_llama_cpp() -> None:
    import subprocess
    import sys

    code = (
        "import sys, specchat.ui.pairs.model_picker; "
        "print(sorted(m for m in ('huggingface_hub', 'llama_cpp') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "[]"
