"""The picker says which drafter each pair uses, marks unchecked catalog entries, and fetches an
MTP pair (its target alone) from the fake hub."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from specchat import paths
from specchat.settings import Settings
from specchat.ui.pairs.model_picker import BAR_MAX, ModelPicker
from specchat.ui.pairs.pair_list import DRAFTER_COLUMN
from specchat.workers.download_payloads import PairStatus
from tests.helpers import fake_hub
from tests.helpers.drafter_files import MTP_PAIR_ID, serve_drafter_pairs


@pytest.fixture
def make_picker(
    qtbot: QtBot, monkeypatch: pytest.MonkeyPatch, home: Path, tmp_path: Path
) -> Iterator[Callable[[], ModelPicker]]:
    monkeypatch.setenv("SPECCHAT_MODEL_CACHE", str(tmp_path / "model-cache"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    made: list[ModelPicker] = []
    with fake_hub.serve() as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        serve_drafter_pairs(hub, tmp_path / "served", paths.user_catalog_path())

        def make() -> ModelPicker:
            picker = ModelPicker(None, settings=Settings(), ask_hub_sizes=False)
            qtbot.addWidget(picker)
            made.append(picker)
            return picker

        yield make
        for picker in made:
            picker.service.shutdown(timeout_s=5.0)


def _row(picker: ModelPicker, pair_id: str) -> tuple[str, ...]:
    item = picker.tree.row(pair_id)
    assert item is not None, pair_id
    return tuple(item.text(column) for column in range(picker.tree.columnCount()))


def test_the_list_says_which_drafter_each_pair_uses(make_picker) -> None:  # type: ignore[no-untyped-def]
    picker = make_picker()
    assert picker.tree.headerItem().text(DRAFTER_COLUMN) == "Drafter"
    expected = {
        "default": ("1.5B + 0.5B", "draft model"),
        "gemma-4-e2b-assistant": ("E2B + 77.2M", "assistant"),
        "qwen3.5-4b-mtp": ("4B", "MTP head"),
        "qwen3.5-9b": ("9B + 0.8B", "draft model"),
    }
    for pair_id, (models, drafter) in expected.items():
        row = _row(picker, pair_id)
        assert (row[1], row[DRAFTER_COLUMN]) == (models, drafter), pair_id
    unchecked = picker.tree.row("qwen3.5-4b-mtp")
    assert unchecked is not None and "Unchecked entry" in unchecked.toolTip(0)
    checked = picker.tree.row("default")
    assert checked is not None and "Unchecked" not in checked.toolTip(0)


def test_the_details_show_the_drafter_and_an_unchecked_entry(make_picker) -> None:  # type: ignore[no-untyped-def]
    picker = make_picker()
    details = picker.details
    draft_row = details._form.labelForField(details.file_labels["draft"])

    picker.select("gemma-4-e2b-assistant")
    assert details.drafter.text().startswith("assistant — a small model that reads")
    assert draft_row.text() == "Assistant:"
    assert "srmiles/gemma-4-E2B-it-assistant-GGUF" in details.file_labels["draft"].text()
    assert not details.entry.isHidden()
    assert "not downloaded when it was added" in details.entry.text()

    picker.select("qwen3.5-4b-mtp")
    assert details.drafter.text().startswith("MTP head — the target's own")
    assert details.file_labels["draft"].text() == "none: the target file holds its MTP head"
    assert details.bars["draft"].isHidden() and not details.bars["target"].isHidden()
    assert draft_row.text() == "Draft:"

    picker.select("default")
    assert details.drafter.text().startswith("draft model — ")
    assert details.entry.isHidden() and not details.bars["draft"].isHidden()


def test_an_mtp_pair_downloads_its_target_and_is_ready(qtbot: QtBot, make_picker) -> None:  # type: ignore[no-untyped-def]
    picker = make_picker()
    picker.select(MTP_PAIR_ID)

    def ready(status: PairStatus) -> bool:
        return status.pair_id == MTP_PAIR_ID and status.ready

    with qtbot.waitSignal(picker.service.surveyed, timeout=30_000, check_params_cb=ready):
        qtbot.mouseClick(picker.details.download_button, Qt.MouseButton.LeftButton)

    assert picker.status_text(MTP_PAIR_ID) == "Ready ✓"
    assert picker.details.bars["target"].value() == BAR_MAX
    assert picker.details.bars["draft"].isHidden()
    assert picker.details.verdict.text() == (
        "✓ compatible: the target carries an MTP head (llama.nextn_predict_layers = 1)"
    )
    checksum = picker.details.checksum.text()
    assert "target: sha256" in checksum and "draft" not in checksum
    assert picker.use_button.isEnabled()
    with qtbot.waitSignal(picker.pair_chosen, timeout=5_000) as chosen:
        qtbot.mouseClick(picker.use_button, Qt.MouseButton.LeftButton)
    assert chosen.args == [MTP_PAIR_ID]
