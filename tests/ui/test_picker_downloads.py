"""Downloads in the picker: cancel pauses while it asks, a finished download is loaded when
nothing else is, sizes are never a bare dash, the hub's errors and retries are told."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pytestqt.qtbot import QtBot

from specchat.models import hub_download
from specchat.ui.pairs import model_picker
from specchat.ui.pairs.model_picker import ModelPicker
from specchat.ui.pairs.pair_list import SIZE_COLUMN, UNKNOWN_SIZE
from specchat.workers.download_worker import FetchCancelled, FileProgress, PairStatus
from tests.helpers.tiny_catalog import ODD_PAIR_ID, PAIR_ID
from tests.ui import test_model_picker as picker_tests
from tests.ui.test_model_picker import Env

# The picker's fixtures (a fake hub serving the tiny pair, pickers on a private home).
env = picker_tests.env
make_picker = picker_tests.make_picker
small_pieces = picker_tests.small_pieces


def _under_way(event: FileProgress) -> bool:
    return event.role == "target" and event.stage == "download" and event.done >= 48 * 1024


def _ready(status: PairStatus) -> bool:
    return status.pair_id == PAIR_ID and status.ready


def _start(qtbot: QtBot, picker: ModelPicker) -> None:
    picker.select(PAIR_ID)
    with qtbot.waitSignal(picker.service.progress, timeout=30_000, check_params_cb=_under_way):
        picker.start_download()


def _asking(
    qtbot: QtBot, picker: ModelPicker, answer: bool | None, seen: list[FetchCancelled]
) -> Callable[[object], bool | None]:
    def ask(_parent: object) -> bool | None:
        # While the question is open the transfer must already be stopped.
        qtbot.waitUntil(lambda: picker.downloads.paused is not None, timeout=10_000)
        paused = picker.downloads.paused
        assert paused is not None
        seen.append(paused)
        return answer

    return ask


def test_cancel_pauses_the_transfer_while_it_asks(  # type: ignore[no-untyped-def]
    qtbot: QtBot, make_picker, env: Env, small_pieces: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    picker = make_picker()
    seen: list[FetchCancelled] = []
    monkeypatch.setattr(model_picker, "ask_keep_partial", _asking(qtbot, picker, True, seen))
    _start(qtbot, picker)
    picker._on_cancel_clicked()
    assert seen and seen[0].kept > 0
    gets = len(env.hub.gets())
    qtbot.wait(300)
    assert len(env.hub.gets()) == gets  # nothing more was fetched
    assert picker.details.message.text().startswith("Download cancelled;")
    assert not picker.status_text(PAIR_ID).startswith("Ready")


def test_continue_downloading_resumes_where_the_pause_stopped(  # type: ignore[no-untyped-def]
    qtbot: QtBot, make_picker, env: Env, small_pieces: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    picker = make_picker()
    seen: list[FetchCancelled] = []
    monkeypatch.setattr(model_picker, "ask_keep_partial", _asking(qtbot, picker, None, seen))
    _start(qtbot, picker)
    env.hub.faults.chunk_delay = 0.0
    with qtbot.waitSignal(picker.service.surveyed, timeout=30_000, check_params_cb=_ready):
        picker._on_cancel_clicked()
    target_gets = [r for r in env.hub.gets() if env.tiny.target.name in r.path]
    assert target_gets[-1].range == f"bytes={seen[0].kept}-"


def test_a_download_is_loaded_when_nothing_else_is(  # type: ignore[no-untyped-def]
    qtbot: QtBot, make_window, env: Env
) -> None:
    window = make_window()
    picker = ModelPicker(window, ask_hub_sizes=False)
    picker.pair_chosen.connect(window._on_pair_chosen)
    picker.select(PAIR_ID)
    with qtbot.waitSignal(window.model_loaded, timeout=60_000) as loaded:
        picker.start_download()
    assert loaded.args[0].label == "Tiny target + close draft"
    picker.reject()


def test_unknown_sizes_are_said_in_words(qtbot: QtBot, make_picker, env: Env) -> None:  # type: ignore[no-untyped-def]
    picker = make_picker()
    # The odd pair's catalog entry names no size and the hub is not asked.
    qtbot.waitUntil(lambda: picker.status_text(ODD_PAIR_ID) != "checking…", timeout=10_000)
    row = picker.tree.row(ODD_PAIR_ID)
    assert row is not None and row.text(SIZE_COLUMN) == UNKNOWN_SIZE


def test_an_unreachable_hub_is_said_plainly_and_each_retry_shows(  # type: ignore[no-untyped-def]
    qtbot: QtBot, make_picker, env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    picker: ModelPicker = make_picker()
    picker.select(PAIR_ID)
    messages = []
    for _ in range(2):
        with qtbot.waitSignal(picker.service.failed, timeout=30_000):
            picker.start_download()
        messages.append(picker.details.message.text())
    assert messages[0].startswith("The hub cannot be reached (no network?)")
    assert "Errno" not in messages[0]
    assert "Attempt 1 at" in messages[0] and "Attempt 2 at" in messages[1]


def test_transient_hub_errors_are_retried_and_each_retry_is_told(  # type: ignore[no-untyped-def]
    qtbot: QtBot, make_picker, env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hub_download, "BACKOFF_S", 0.01)
    picker: ModelPicker = make_picker()
    notices: list[str] = []
    picker.service.notice.connect(notices.append)
    picker.select(PAIR_ID)
    env.hub.faults.fail_status = 503
    env.hub.faults.fail_count = 2
    with qtbot.waitSignal(picker.service.surveyed, timeout=30_000, check_params_cb=_ready):
        picker.start_download()
    retries = [n for n in notices if "trying again" in n]
    assert retries and "(2 of 4)" in retries[0]
    assert "Errno" not in " ".join(notices)
