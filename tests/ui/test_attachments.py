"""Attaching files in the window: the paperclip, a drop, a paste; chips; refusals; sending,
storing, exporting, showing, regenerating and giving back a message with its files."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QEvent, QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent, QGuiApplication
from PySide6.QtWidgets import QApplication, QFileDialog, QLabel, QToolButton, QWidget
from pytestqt.qtbot import QtBot

from specchat import settings as cfg
from specchat.engine.attachments import MAX_BYTES
from specchat.engine.history import ATTACHMENT_KEY
from specchat.engine.suffix.index import Source
from specchat.engine.types import TokenKind
from specchat.settings import Settings
from specchat.store.attachment_records import Attachment
from specchat.tinymodels import TinyModels
from specchat.ui.transcript.attachment_blocks import ATTACHMENT_SCHEME
from specchat.ui.transcript.spans import Span, span_tooltip
from specchat.ui.window.main_window import MainWindow
from specchat.workers.generation import GenerateRequest
from tests.ui.conftest import load_tiny

Maker = Callable[..., Any]
CODE = "def add(a, b):\n    return a + b\n"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    made = {
        "add.py": CODE.encode(),
        "notes.txt": "caf\u00e9 and more\n".encode(),
        "image.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00",
        "huge.log": b"x" * (MAX_BYTES + 1),
    }
    for name, data in made.items():
        (tmp_path / name).write_bytes(data)
    return {name: tmp_path / name for name in made}


def _mime(*paths: Path) -> QMimeData:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path)) for path in paths])
    return mime


def _drop(target: QWidget, mime: QMimeData) -> QDropEvent:
    """A real drag entering `target` and dropping there, as Qt delivers one."""
    enter = QDragEnterEvent(
        QPointF(20, 20),
        Qt.DropAction.CopyAction,
        mime,
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
    )
    QApplication.sendEvent(target, enter)
    assert enter.isAccepted()
    drop = QDropEvent(
        QPointF(20, 20),
        Qt.DropAction.CopyAction,
        mime,
        Qt.MouseButton.LeftButton,
        Qt.KeyboardModifier.NoModifier,
        QEvent.Type.Drop,
    )
    QApplication.sendEvent(target, drop)
    return drop


def _chips(window: MainWindow) -> list[str]:
    return [chip.findChild(QLabel).text() for chip in window.chat_pane.chips.chips]


def test_the_paperclip_attaches_the_chosen_files(
    qtbot: QtBot, make_window: Maker, files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    window: MainWindow = make_window()
    window.show()
    chosen = [str(files["add.py"]), str(files["notes.txt"])]
    monkeypatch.setattr(QFileDialog, "getOpenFileNames", lambda *a, **k: (chosen, ""))
    qtbot.mouseClick(window.chat_pane.attach_button, Qt.MouseButton.LeftButton)
    assert _chips(window) == ["add.py · 32 B · ≈10 tokens", "notes.txt · 15 B · ≈5 tokens"]
    assert window.chat_pane.chips.isVisible()
    assert [a.encoding for a in window.chat_pane.attachments.items] == ["utf-8", "utf-8"]
    assert "read as utf-8" in window.chat_pane.chips.chips[0].toolTip()


def test_files_dropped_on_the_window_or_the_composer_are_attached(
    qtbot: QtBot, make_window: Maker, files: dict[str, Path]
) -> None:
    window: MainWindow = make_window()
    window.show()
    drop = _drop(window, _mime(files["add.py"], files["notes.txt"]))
    assert drop.isAccepted()
    assert [a.name for a in window.chat_pane.attachments.items] == ["add.py", "notes.txt"]
    assert len(_chips(window)) == 2
    window.composer.setPlainText("keep me")
    _drop(window.composer.viewport(), _mime(files["add.py"]))
    # Attached, not written into the message as a path.
    assert [a.name for a in window.chat_pane.attachments.items] == ["add.py", "notes.txt", "add.py"]
    assert window.composer.toPlainText() == "keep me"


def test_a_pasted_file_is_attached_and_pasted_text_still_pastes(
    qtbot: QtBot, make_window: Maker, files: dict[str, Path]
) -> None:
    window: MainWindow = make_window()
    window.show()
    QGuiApplication.clipboard().setMimeData(_mime(files["notes.txt"]))
    window.composer.setFocus()
    qtbot.keyClick(window.composer, Qt.Key.Key_V, Qt.KeyboardModifier.ControlModifier)
    assert [a.name for a in window.chat_pane.attachments.items] == ["notes.txt"]
    assert window.composer.toPlainText() == ""
    QGuiApplication.clipboard().setText("plain words")
    window.composer.paste()
    assert window.composer.toPlainText() == "plain words"
    assert len(window.chat_pane.attachments.items) == 1


def test_a_chip_removes_its_file(qtbot: QtBot, make_window: Maker, files: dict[str, Path]) -> None:
    window: MainWindow = make_window()
    window.show()
    window.chat_pane.attachments.add_paths([files["add.py"], files["notes.txt"]])
    remove = window.chat_pane.chips.chips[0].findChild(QToolButton)
    assert remove.toolTip() == "Remove add.py"
    qtbot.mouseClick(remove, Qt.MouseButton.LeftButton)
    assert [a.name for a in window.chat_pane.attachments.items] == ["notes.txt"]
    assert _chips(window) == ["notes.txt · 15 B · ≈5 tokens"]
    window.chat_pane.chips.chips[0].findChild(QToolButton).click()
    assert window.chat_pane.attachments.items == () and not window.chat_pane.chips.isVisible()


def test_binary_and_oversized_files_are_refused_with_the_reason(
    qtbot: QtBot, make_window: Maker, files: dict[str, Path]
) -> None:
    window: MainWindow = make_window()
    window.show()
    _drop(window, _mime(files["image.png"], files["add.py"], files["huge.log"]))
    assert [a.name for a in window.chat_pane.attachments.items] == ["add.py"]
    assert window.banner.isVisible() and window.banner.kind == "error"
    assert window.banner.label.text() == (
        "image.png looks binary (it holds NUL bytes): only text files can be attached.\n"
        "huge.log is 1.0 MB: files over 1.0 MB are not attached."
    )


def _ready(qtbot: QtBot, make_window: Maker, tiny: TinyModels, n_ctx: int = 0) -> MainWindow:
    if n_ctx:
        Settings().set(cfg.N_CTX, n_ctx)
    window: MainWindow = make_window()
    window.settings.set(cfg.MAX_TOKENS, 24)
    window.show()
    load_tiny(qtbot, window, tiny)
    return window


def _requests(window: MainWindow) -> list[GenerateRequest]:
    sent: list[GenerateRequest] = []
    window.service.generate_requested.connect(sent.append)
    return sent


def test_a_message_with_files_is_answered_stored_shown_exported_and_regenerated(
    qtbot: QtBot, make_window: Maker, tiny_models: TinyModels, files: dict[str, Path]
) -> None:
    window = _ready(qtbot, make_window, tiny_models)
    sent = _requests(window)
    window.chat_pane.attachments.add_paths([files["add.py"], files["notes.txt"]])
    window.composer.setPlainText("Add logging")
    with qtbot.waitSignal(window.answer_done, timeout=60_000):
        window.chat_pane.send_button.click()
    asked = sent[-1].messages[-1].content
    assert asked.startswith(f"add.py\n```python\n{CODE}```\n\nnotes.txt\n```text\n")
    assert asked.endswith("```\n\nAdd logging")
    assert window.chat_pane.attachments.items == () and not window.chat_pane.chips.isVisible()
    conversation = window._conversation_id
    assert conversation is not None
    stored = window.store.messages(conversation)[0]
    assert stored.content == "Add logging"
    assert [(a.name, a.text) for a in stored.attachments] == [
        ("add.py", CODE),
        ("notes.txt", "caf\u00e9 and more\n"),
    ]
    # The transcript shows each file folded, and opens it in place.
    shown = window.chat_view.toPlainText()
    assert "▸ Attached: add.py · 32 B · utf-8" in shown and "return a + b" not in shown
    window.chat_view.anchorClicked.emit(QUrl(f"{ATTACHMENT_SCHEME}:0/0"))
    assert "▾ Attached: add.py" in window.chat_view.toPlainText()
    assert "    return a + b" in window.chat_view.toPlainText()
    # Exports carry the files.
    md, js = Path(window.store.path).with_suffix(".md"), Path(window.store.path).with_suffix(".js")
    window.export_conversation(md, kind="md")
    window.export_conversation(js, kind="json")
    assert f"```\n{CODE}```" in md.read_text(encoding="utf-8")
    document = json.loads(js.read_text(encoding="utf-8"))
    assert [a["name"] for a in document["messages"][0]["attachments"]] == ["add.py", "notes.txt"]
    # A regenerate asks again with the files.
    with qtbot.waitSignal(window.answer_done, timeout=60_000):
        assert window.regenerate()
    assert sent[-1].messages[-1].content == asked
    # Reopened from the store, the transcript shows them still.
    window.new_conversation()
    window.open_conversation(conversation)
    assert "▸ Attached: notes.txt · 15 B · utf-8" in window.chat_view.toPlainText()


def test_a_message_whose_files_cannot_fit_goes_back_with_them(
    qtbot: QtBot, make_window: Maker, tiny_models: TinyModels, tmp_path: Path
) -> None:
    window = _ready(qtbot, make_window, tiny_models, n_ctx=256)
    big = tmp_path / "big.txt"
    big.write_text("All of this is in the file. " * 60, encoding="utf-8")
    window.chat_pane.attachments.add_paths([big])
    window.composer.setPlainText("Summarise")
    with qtbot.waitSignal(window.answer_done, timeout=60_000):
        window.chat_pane.send_button.click()
    text = window.banner.label.text()
    assert "of them its attachments) but the context holds" in text, text
    assert "remove an attachment or shorten the message" in text
    assert window.composer.toPlainText() == "Summarise"
    assert [a.name for a in window.chat_pane.attachments.items] == ["big.txt"]
    assert window.chat_view.message_count() == 0
    assert window.status_line.status_label.text() == "Message not sent."


def test_drafts_copied_from_an_attachment_say_so_until_it_is_deleted(
    qtbot: QtBot, make_window: Maker, tiny_models: TinyModels
) -> None:
    question = "Write a function that adds two numbers."
    window = _ready(qtbot, make_window, tiny_models)
    window.controls.set_mode("plain")
    with qtbot.waitSignal(window.answer_done, timeout=60_000):
        window.send(question)
    first = window._conversation_id
    assert first is not None
    said = window.store.messages(first)[-1].content
    # Only a file attached in another chat holds that answer now.
    holder = window.store.create("the file")
    window.store.add_message(holder.id, "user", "keep", attachments=(Attachment("a.md", said),))
    window.conversation_list.delete(first)
    history = window.service.worker._history
    assert history is not None and history.wait_idle(timeout=30)
    index = history.said
    assert any(isinstance(k, tuple) and k[0] == ATTACHMENT_KEY for k in index.stored())

    def kept_origins() -> dict[str, int]:
        rounds: list[Any] = []
        window.answers.round_shown.connect(rounds.append)
        window.new_conversation()
        with qtbot.waitSignal(window.answer_done, timeout=60_000):
            window.send(question)
        window.answers.round_shown.disconnect(rounds.append)
        kept: dict[str, int] = {}
        for shown in rounds:
            for e in shown.result.events:
                if e.kind == TokenKind.ACCEPTED:
                    kept[e.origin] = kept.get(e.origin, 0) + 1
        return kept

    window.controls.set_mode("suffix")
    kept = kept_origins()
    assert kept.get(Source.ATTACHMENT.value, 0) > 0, kept
    assert "attachment" in window.stats_panel.kept_sources.text()
    # The transcript's token tooltips say so too, read back from the painted document.
    from_file = [e for _, _, e in window.chat_view.painted_spans() if e is not None]
    tips = [span_tooltip(Span(e.text, e.kind, e)) for e in from_file]
    assert any(tip.endswith("drafted from an attachment") for tip in tips)
    # The conversation holding the file goes: its text is never proposed again.
    window.conversation_list.delete(holder.id)
    assert not any(isinstance(k, tuple) and k[0] == ATTACHMENT_KEY for k in index.stored())
    assert history.wait_idle(timeout=30)
    assert kept_origins().get(Source.ATTACHMENT.value, 0) == 0
