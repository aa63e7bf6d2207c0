"""The picker's sizes: exact where the catalog knows the bytes, the publisher's figure marked ≈."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from specchat.ui.pairs.model_picker import ModelPicker
from specchat.ui.pairs.pair_list import SIZE_COLUMN, UNKNOWN_SIZE
from tests.ui import test_model_picker as picker_tests
from tests.ui.test_model_picker import Env

# The picker's fixtures (a fake hub serving the tiny pair, pickers on a private home).
env = picker_tests.env
make_picker = picker_tests.make_picker


def _size(qtbot: QtBot, picker: ModelPicker, pair_id: str) -> str:
    # After the survey, so the row shows what the files' status says, not the first guess.
    qtbot.waitUntil(lambda: picker.status_text(pair_id) != "checking…", timeout=20_000)
    row = picker.tree.row(pair_id)
    assert row is not None
    return str(row.text(SIZE_COLUMN))


def test_catalog_pairs_show_exact_or_approximate_sizes(qtbot: QtBot, make_picker, env: Env) -> None:  # type: ignore[no-untyped-def]
    picker = make_picker()
    # Both files known to the byte: 1,117,320,768 + 491,400,064.
    assert _size(qtbot, picker, "default") == "1.6 GB"
    # 4.68 GB as published plus the 0.5B draft's exact bytes: the total is approximate.
    assert _size(qtbot, picker, "qwen2.5-coder-7b") == "≈ 5.2 GB"
    assert _size(qtbot, picker, "llama-3.1-8b") == "≈ 5.7 GB"  # 4.92 GB + 808 MB
    for pair_id in ("qwen2.5-7b", "gemma-2-9b"):  # the other shipped pairs
        assert _size(qtbot, picker, pair_id) != UNKNOWN_SIZE, pair_id

    picker.select("llama-3.1-8b")
    assert "≈ 4.92 GB" in picker.details.file_labels["target"].text()
    assert "≈ 808 MB" in picker.details.file_labels["draft"].text()
    picker.select("default")
    assert "1.1 GB" in picker.details.file_labels["target"].text()
    assert "≈" not in picker.details.file_labels["target"].text()
