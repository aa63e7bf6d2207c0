"""A conversation that outgrows a small context window keeps working through the worker and the
window: the oldest turns are dropped (and the user told), or, with "refuse", a clear message."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from specchat import paths
from specchat import settings as cfg
from specchat.engine.context import OverflowPolicy
from specchat.engine.templates.chat_template import ChatMessage
from specchat.engine.types import Controls, StopReason
from specchat.settings import Settings
from specchat.store.conversations import ConversationStore
from specchat.tinymodels import TinyModels
from specchat.ui.chat.answer import AnswerDone
from specchat.ui.window.main_window import MainWindow
from specchat.workers.generation import (
    Failure,
    GenerateRequest,
    GenerationFinished,
    Loaded,
    LoadRequest,
    PromptPrepared,
    RoundUpdate,
)
from specchat.workers.generation_service import GenerationService

N_CTX = 256
MAX_TOKENS = 32
SYSTEM = ChatMessage("system", "You are terse.")


def _load(qtbot: QtBot, svc: GenerationService, tiny: TinyModels) -> Loaded:
    with qtbot.waitSignal(svc.loaded, timeout=30_000) as blocker:
        svc.load(
            LoadRequest(
                svc.new_id(),
                target=tiny.target,
                draft=tiny.draft_close,
                n_ctx=N_CTX,
                target_gpu_layers=0,
                draft_gpu_layers=0,
                calibrate=False,
            )
        )
    return blocker.args[0]


class _Answer:
    """What the worker sent back for one request."""

    def __init__(self, qtbot: QtBot, svc: GenerationService, request: GenerateRequest) -> None:
        self.prepared: PromptPrepared | None = None
        self.rounds: list[RoundUpdate] = []
        self.end: GenerationFinished | Failure | None = None
        mine = request.request_id

        def keep(target: str) -> object:
            def on(payload: object) -> None:
                if getattr(payload, "request_id", None) == mine:
                    if target == "rounds":
                        self.rounds.append(payload)  # type: ignore[arg-type]
                    else:
                        setattr(self, target, payload)

            return on

        slots = [
            (svc.prepared, keep("prepared")),
            (svc.round_ready, keep("rounds")),
            (svc.finished, keep("end")),
            (svc.failed, keep("end")),
        ]
        for signal, slot in slots:
            signal.connect(slot)
        try:
            svc.generate(request)
            qtbot.waitUntil(lambda: self.end is not None, timeout=30_000)
        finally:
            for signal, slot in slots:
                signal.disconnect(slot)


def _turn(i: int) -> str:
    return f"Question {i}: tell me about the cat that sat on mat number {i}."


def test_growing_conversation_drops_oldest_turns_through_the_worker(
    qtbot: QtBot, service: GenerationService, tiny_models: TinyModels
) -> None:
    loaded = _load(qtbot, service, tiny_models)
    n_ctx = loaded.info.target.n_ctx  # what llama.cpp really made of N_CTX
    assert n_ctx >= N_CTX
    messages = [SYSTEM, ChatMessage("user", _turn(0))]
    dropped_turns = 0
    for i in range(1, 25):
        request = GenerateRequest(
            service.new_id(),
            tuple(messages),
            max_tokens=MAX_TOKENS,
            controls=Controls("auto"),
            policy=OverflowPolicy.DROP_OLDEST,
        )
        answer = _Answer(qtbot, service, request)
        assert isinstance(answer.end, GenerationFinished), f"turn {i}: {answer.end}"
        assert answer.end.stop in (StopReason.MAX_TOKENS, StopReason.EOS), f"turn {i}"
        prepared = answer.prepared
        assert prepared is not None and answer.rounds
        # The prompt and the whole answer fit; what went were whole turns, oldest first,
        # never the system prompt nor the question being answered.
        assert prepared.prompt_tokens + MAX_TOKENS <= n_ctx
        dropped = prepared.dropped
        assert dropped == tuple(range(1, 1 + len(dropped))), f"turn {i}: dropped {dropped}"
        assert len(dropped) % 2 == 0 and len(messages) - 1 not in dropped
        if dropped:
            dropped_turns += 1
            assert messages[dropped[-1] + 1].role == "user"
        messages += [ChatMessage("assistant", answer.end.text), ChatMessage("user", _turn(i))]
    # Most turns of a conversation this long had to drop something, and it kept answering.
    assert dropped_turns >= 15


def test_refuse_policy_and_oversized_messages_give_a_message_not_an_abort(
    qtbot: QtBot, service: GenerationService, tiny_models: TinyModels
) -> None:
    _load(qtbot, service, tiny_models)
    history: list[ChatMessage] = [SYSTEM]
    for i in range(12):
        history += [ChatMessage("user", _turn(i)), ChatMessage("assistant", "the cat " * 8)]
    history.append(ChatMessage("user", "And the last one?"))
    cases = (
        (history, OverflowPolicy.REFUSE, MAX_TOKENS, "start a new conversation"),
        ([ChatMessage("user", "mat " * 600)], OverflowPolicy.DROP_OLDEST, MAX_TOKENS, "shorten"),
        ([ChatMessage("user", "mat " * 600)], OverflowPolicy.REFUSE, MAX_TOKENS, "tokens but"),
    )
    for messages, policy, max_tokens, hint in cases:
        request = GenerateRequest(
            service.new_id(), tuple(messages), max_tokens=max_tokens, policy=policy
        )
        answer = _Answer(qtbot, service, request)
        assert isinstance(answer.end, Failure), f"{policy.name}: {answer.end}"
        message = answer.end.message
        assert message.startswith("The conversation does not fit the context window"), message
        assert hint in message and "Traceback" not in message
        assert answer.prepared is None and not answer.rounds
    # The same long history under drop_oldest answers; and an answer longer than the context
    # stops cleanly when the context is full.
    answer = _Answer(
        qtbot, service, GenerateRequest(service.new_id(), tuple(history), max_tokens=MAX_TOKENS)
    )
    assert isinstance(answer.end, GenerationFinished) and answer.prepared is not None
    assert answer.prepared.dropped
    answer = _Answer(
        qtbot,
        service,
        GenerateRequest(
            service.new_id(), (ChatMessage("user", "Go on forever."),), max_tokens=100_000
        ),
    )
    assert isinstance(answer.end, GenerationFinished)
    assert answer.end.stop == StopReason.CONTEXT_FULL and answer.end.stats.emitted > 0


@pytest.fixture
def window(
    qtbot: QtBot, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_models: TinyModels
) -> Iterator[MainWindow]:
    monkeypatch.setenv(paths.HOME_ENV, str(tmp_path / "home"))
    settings = Settings()
    settings.set(cfg.N_CTX, N_CTX)
    settings.set(cfg.MAX_TOKENS, MAX_TOKENS)
    settings.set(cfg.CALIBRATE_PLAIN, False)
    store = ConversationStore()
    made = MainWindow(settings=settings, store=store, autoload=False, n_threads=1)
    qtbot.addWidget(made)
    made.show()
    with qtbot.waitSignal(made.model_loaded, timeout=30_000):
        made.load_files(tiny_models.target, tiny_models.draft_close, label="tiny")
    yield made
    made.close()
    store.close()


def test_window_tells_the_user_and_honours_the_setting(qtbot: QtBot, window: MainWindow) -> None:
    assert window.settings.get(cfg.CONTEXT_OVERFLOW) == "drop_oldest"
    notices: list[str] = []
    for i in range(14):
        with qtbot.waitSignal(window.answer_done, timeout=30_000) as blocker:
            assert window.send(_turn(i))
        done: AnswerDone = blocker.args[0]
        assert done.stop in (StopReason.MAX_TOKENS, StopReason.EOS), f"turn {i}"
        if window.banner.isVisible():
            assert window.banner.kind == "info"
            notices.append(window.banner.label.text())
    assert notices, "the window never said that old messages were left out"
    assert "left out so the conversation fits the context window" in notices[-1]
    conversation = window._conversation_id
    assert conversation is not None
    # Nothing is deleted from the conversation itself: only the prompt leaves turns out.
    stored = window.store.messages(conversation)
    assert [m.role for m in stored] == ["user", "assistant"] * 14
    assert all(m.finished for m in stored)

    window.settings.set(cfg.CONTEXT_OVERFLOW, "refuse")
    with qtbot.waitSignal(window.error_shown, timeout=30_000) as blocker:
        assert window.send("One more?")
    message = blocker.args[0]
    assert message.startswith("The conversation does not fit the context window"), message
    assert window.banner.kind == "error" and window.banner.label.text() == message
    assert not window.generating and window.chat_pane.send_button.isEnabled()

    # Back to dropping: the same conversation answers again.
    window.settings.set(cfg.CONTEXT_OVERFLOW, "drop_oldest")
    with qtbot.waitSignal(window.answer_done, timeout=30_000) as blocker:
        assert window.send("And now?")
    assert blocker.args[0].stop in (StopReason.MAX_TOKENS, StopReason.EOS)
