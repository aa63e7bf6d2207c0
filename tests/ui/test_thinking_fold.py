"""The transcript shows an answer's thinking, as the worker's answer reader tagged its tokens,
folded above its reply: a header with its token count (closed by default, opened by a click),
thinking tokens keeping their speculation colours, the markup around the thinking never
shown, and the reply alone copied."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QUrl
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from specchat import settings as cfg
from specchat.engine.types import (
    PolicyChoice,
    RoundResult,
    Stats,
    StopReason,
    TokenEvent,
    TokenKind,
)
from specchat.tinymodels import TinyModels
from specchat.ui.transcript.chat_view import ChatView
from specchat.ui.transcript.spans import Span
from specchat.ui.transcript.thinking_fold import THOUGHT_SCHEME
from specchat.ui.window.main_window import MainWindow
from tests.conftest import RealChatModels

T, M = "thinking", "markup"
#: An answer whose prompt opened the thinking (Qwen3.5): its tokens and their tags.
QWEN = [
    ("\n", T),
    ("Plan", T),
    (": add", T),
    (" it", T),
    (".\n", T),
    ("</think>", M),
    ("\n\n", ""),
    ("It is ", ""),
    ("4.", ""),
]
GEMMA = [
    ("<|channel>", M),
    ("thought", M),
    ("\n", T),
    ("Sum", T),
    (" them", T),
    ("<channel|>", M),
    ("Four.", ""),
]


def _spans(tokens: list[tuple[str, str]]) -> list[Span]:
    return [Span(text, TokenKind.PLAIN, thinking=tag) for text, tag in tokens]


def _view(qtbot: QtBot) -> ChatView:
    view = ChatView()
    qtbot.addWidget(view)
    view.resize(600, 400)
    view.show()
    qtbot.waitExposed(view)
    return view


def _round(index: int, texts: list[str], kind: TokenKind) -> RoundResult:
    events = tuple(
        TokenEvent(kind, 0, text, 0.9, 0.8, index, n, 1.0) for n, text in enumerate(texts)
    )
    return RoundResult(
        index=index,
        events=events,
        rejected=(),
        rejected_text="",
        drafted=len(texts),
        accepted=len(texts),
        draft_ms=0.0,
        verify_ms=1.0,
        choice=PolicyChoice("lookup", len(texts), "test"),
        temperature=0.0,
        stats=Stats(),
        text="".join(texts),
    )


def _open(view: ChatView, index: int) -> None:
    view.anchorClicked.emit(QUrl(f"{THOUGHT_SCHEME}:{index}"))
    QApplication.processEvents()


def test_a_stored_answer_shows_its_thinking_folded_with_its_token_count(qtbot: QtBot) -> None:
    view = _view(qtbot)
    view.add_answer(_spans(QWEN))
    shown = view.document().toPlainText()
    assert "▸ Thought · 5 tokens" in shown
    assert "Plan" not in shown and "<think>" not in shown and "</think>" not in shown
    assert shown.rstrip().endswith("It is 4.")
    assert view.answer_markdown() == "It is 4."
    _open(view, 0)
    shown = view.document().toPlainText()
    assert "▾ Thought · 5 tokens\nPlan: add it.\nIt is 4." in shown
    _open(view, 0)
    assert "Plan" not in view.document().toPlainText()


def test_a_streamed_answer_counts_its_thinking_then_writes_the_reply(qtbot: QtBot) -> None:
    view = _view(qtbot)
    view.begin_answer()
    first, then = GEMMA[:4], GEMMA[4:]
    view.append_round(_round(0, [t for t, _ in first], TokenKind.ACCEPTED), [g for _, g in first])
    view.flush()
    assert "▸ Thinking… · 2 tokens" in view.document().toPlainText()
    view.append_round(_round(1, [t for t, _ in then], TokenKind.PLAIN), [g for _, g in then])
    view.end_answer()
    shown = view.document().toPlainText()
    assert "▸ Thought · 3 tokens" in shown and shown.rstrip().endswith("Four.")
    assert "thought" not in shown and "channel" not in shown
    # opened, the thinking keeps each token's speculation colours
    _open(view, 0)
    painted = view.painted_spans()
    kinds = {text: kind for text, kind, _ in painted}
    assert kinds["Sum"] is TokenKind.ACCEPTED and kinds[" them"] is TokenKind.PLAIN
    assert "".join(text for text, _, _ in painted) == "Sum themFour."  # blocks apart


def test_an_answer_without_thinking_is_shown_as_written(qtbot: QtBot) -> None:
    view = _view(qtbot)
    view.add_answer([Span("Use ", TokenKind.PLAIN), Span("<think> tags.", TokenKind.PLAIN)])
    assert view.document().toPlainText().rstrip().endswith("Use <think> tags.")
    assert "Thought" not in view.document().toPlainText()
    # an answer stored before the tags (its opening marker in front) is shown as written
    view.add_answer(_spans([("<think>", ""), ("a", ""), ("</think>", ""), ("b", "")]))
    assert view.document().toPlainText().rstrip().endswith("<think>a</think>b")


def test_an_answer_stopped_inside_its_thinking_keeps_it(qtbot: QtBot) -> None:
    view = _view(qtbot)
    view.begin_answer()
    view.append_round(_round(0, [t for t, _ in QWEN[:4]], TokenKind.PLAIN), [T] * 4)
    view.end_answer(note="stopped")
    shown = view.document().toPlainText()
    assert "▸ Thought · 4 tokens" in shown and "(stopped)" in shown
    _open(view, 0)
    assert "Plan: add it" in view.document().toPlainText()


def test_the_window_folds_a_qwen35_answers_thinking_and_stores_it_marked(
    qtbot: QtBot, make_window: Callable[..., Any], real_chat_models: RealChatModels
) -> None:
    window: MainWindow = make_window()
    window.settings.set(cfg.MAX_TOKENS, 24)
    window.show()
    with qtbot.waitSignal(window.model_loaded, timeout=60_000):
        window.load_files(real_chat_models.qwen35, None, label="tiny qwen3.5")
    with qtbot.waitSignal(window.answer_done, timeout=60_000) as blocker:
        assert window.send("What is 2 + 2?")
    assert blocker.args[0].stop is StopReason.MAX_TOKENS
    # Qwen3.5's template opens <think> in the prompt: the random-weight answer is all thinking
    shown = window.chat_view.document().toPlainText()
    assert "▸ Thought · " in shown
    conversation = window.store.conversations()[0].id
    stored = window.store.messages(conversation)[-1]
    # stored as the model wrote it, each token tagged as the answer's reader read it
    assert not stored.content.startswith("<think>")
    assert stored.token_kinds is not None and len(stored.token_kinds) == 24
    tags = [span[2] if len(span) > 2 else "" for span in stored.token_kinds]
    assert set(tags) <= {T, M} and T in tags
    thought = sum(tag == T for tag in tags)
    assert f"▸ Thought · {thought} token{'' if thought == 1 else 's'}" in shown
    assert window.chat_view.answer_markdown() == ""  # nothing of it is reply
    window.chat_view.anchorClicked.emit(QUrl(f"{THOUGHT_SCHEME}:1"))
    thinking = "".join(span[0] for span in stored.token_kinds if span[2:] == (T,))
    assert thinking.strip("\n")[:20] in window.chat_view.document().toPlainText()


def test_the_think_switch_reaches_the_template_and_is_kept(
    qtbot: QtBot, make_window: Callable[..., Any], real_chat_models: RealChatModels
) -> None:
    window: MainWindow = make_window()
    window.settings.set(cfg.MAX_TOKENS, 4)
    window.show()
    assert not window.chat_pane.think_check.isVisible()  # no model: no switch
    with qtbot.waitSignal(window.model_loaded, timeout=60_000):
        window.load_files(real_chat_models.qwen35, None, label="tiny qwen3.5")
    assert window.chat_pane.think_check.isVisible() and window.chat_pane.think_check.isChecked()
    window.menus.think_action.trigger()  # Ctrl+T
    assert not window.chat_pane.think_check.isChecked()
    assert window.settings.get(cfg.THINK) is False
    with qtbot.waitSignal(window.answer_done, timeout=60_000):
        assert window.send("Hi")
    stored = window.store.messages(window.store.conversations()[0].id)[-1]
    # thinking off: Qwen3.5's template closes an empty block itself; nothing is thinking
    assert stored.token_kinds is not None
    assert all(len(span) == 2 for span in stored.token_kinds)
    assert "Thought" not in window.chat_view.document().toPlainText()


def test_a_template_without_a_thinking_switch_offers_none(
    qtbot: QtBot, make_window: Callable[..., Any], tiny_models: TinyModels
) -> None:
    window: MainWindow = make_window()
    window.show()
    with qtbot.waitSignal(window.model_loaded, timeout=60_000):
        window.load_files(tiny_models.target, None, label="tiny")
    assert not window.chat_pane.think_check.isVisible()
    assert not window.menus.think_action.isEnabled()
    assert window.view.thinking() is None
