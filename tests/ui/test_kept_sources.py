"""The stats panel says where the current answer's kept drafts came from."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from pytestqt.qtbot import QtBot

from specchat import settings as cfg
from specchat.engine.types import TokenKind
from specchat.tinymodels import TinyModels
from specchat.ui.chat.answer import AnswerRound
from tests.ui.conftest import load_tiny

Maker = Callable[..., Any]
QUESTION = "Write a function that adds two numbers."


def _answer(qtbot: QtBot, window: Any, start: Callable[[], bool]) -> list[AnswerRound]:
    rounds: list[AnswerRound] = []
    window.answers.round_shown.connect(rounds.append)
    with qtbot.waitSignal(window.answer_done, timeout=60_000):
        assert start()
    window.answers.round_shown.disconnect(rounds.append)
    assert rounds
    return rounds


def _kept_by_origin(rounds: list[AnswerRound]) -> dict[str, int]:
    """What the rounds say: each kept token's origin ("an earlier chat" reads "earlier chat")."""
    kept = Counter(
        e.origin.removeprefix("an ")
        for shown in rounds
        for e in shown.result.events
        if e.kind == TokenKind.ACCEPTED
    )
    assert sum(kept.values()) == rounds[-1].result.stats.accepted
    return dict(kept)


def _shown(window: Any) -> dict[str, int]:
    text = window.stats_panel.kept_sources.text()
    assert text.startswith("Kept drafts: "), text
    body = text.removeprefix("Kept drafts: ")
    if body == "—":
        return {}
    pairs = (part.rsplit(" ", 1) for part in body.split(" · "))
    return {source: int(count) for source, count in pairs}


def test_the_stats_name_the_sources_of_kept_drafts(
    qtbot: QtBot, make_window: Maker, tiny_models: TinyModels
) -> None:
    window = make_window()
    window.settings.set(cfg.MAX_TOKENS, 40)
    window.show()
    load_tiny(qtbot, window, tiny_models)
    label = window.stats_panel.kept_sources
    window.controls.set_mode("plain")
    _answer(qtbot, window, lambda: window.send(QUESTION))
    first = window._conversation_id
    said = window.store.messages(first)[-1].content
    # An earlier chat holds that answer; the chat it was given in is deleted (its text is
    # never proposed again), so what the next chat copies can only come from the earlier one.
    earlier = window.store.create("adding numbers")
    window.store.add_message(earlier.id, "user", "How do I add two numbers?")
    window.store.add_message(earlier.id, "assistant", said)
    window.conversation_list.delete(first)
    history = window.service.worker._history
    assert history is not None and history.wait_idle(timeout=30)

    window.new_conversation()
    assert label.text() == ""
    window.controls.set_mode("suffix")
    rounds = _answer(qtbot, window, lambda: window.send(QUESTION))
    expected = _kept_by_origin(rounds)
    assert expected.get("earlier chat", 0) > 0, expected
    assert _shown(window) == expected
    assert window.stats_panel.label_text("counts").startswith(f"{sum(expected.values())} /")

    # A regenerate counts its own rounds only, from nothing.
    rounds = _answer(qtbot, window, window.regenerate)
    again = _kept_by_origin(rounds)
    # The answer just replaced is this chat's text now, drafted from again.
    assert again.get("this chat", 0) > 0, again
    assert _shown(window) == again

    # An answer where nothing was drafted shows a dash, not the last answer's counts.
    window.controls.set_mode("plain")
    _answer(qtbot, window, lambda: window.send("And now?"))
    assert label.text() == "Kept drafts: —"


def test_the_same_question_in_a_new_chat_is_drafted_from_the_earlier_one(
    qtbot: QtBot, make_window: Maker, tiny_models: TinyModels
) -> None:
    """A new chat opening with the very text of the last one: what it copies comes from the
    earlier chat (the store has it), and the stats say so rather than "this chat"."""
    window = make_window()
    window.settings.set(cfg.MAX_TOKENS, 40)
    window.show()
    load_tiny(qtbot, window, tiny_models)
    window.controls.set_mode("plain")
    _answer(qtbot, window, lambda: window.send(QUESTION))
    history = window.service.worker._history
    assert history is not None and history.wait_idle(timeout=30)

    window.new_conversation()
    window.controls.set_mode("suffix")
    rounds = _answer(qtbot, window, lambda: window.send(QUESTION))
    expected = _kept_by_origin(rounds)
    assert expected.get("earlier chat", 0) > 0, expected
    assert _shown(window) == expected
