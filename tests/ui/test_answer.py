"""The answer controller without a window: streaming into the store, stop, failure."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from specchat.engine.context import OverflowPolicy
from specchat.engine.types import Controls, SamplingParams, StopReason
from specchat.store.conversations import ConversationStore
from specchat.tinymodels import TinyModels
from specchat.ui.chat.answer import AnswerController, AnswerEnded, AnswerRound, AnswerStarted
from specchat.workers.generation import LoadRequest
from specchat.workers.generation_service import GenerationService

DRAFT_K3 = Controls("draft", 3, SamplingParams())


@pytest.fixture
def store(tmp_path: Path) -> Iterator[ConversationStore]:
    with ConversationStore(tmp_path / "conversations.db") as opened:
        yield opened


def _load(qtbot: QtBot, service: GenerationService, tiny: TinyModels) -> None:
    request = LoadRequest(
        service.new_id(),
        target=tiny.target,
        draft=tiny.draft_close,
        n_ctx=2048,
        target_gpu_layers=0,
        draft_gpu_layers=0,
        calibrate=False,
    )
    with qtbot.waitSignal(service.loaded, timeout=30_000):
        service.load(request)


def _conversation(store: ConversationStore, text: str = "Tell me a story.") -> int:
    conversation = store.create("test")
    store.add_message(conversation.id, "user", text)
    return conversation.id


def _start(answers: AnswerController, conversation_id: int, *, max_tokens: int) -> None:
    answers.start(
        conversation_id,
        controls=DRAFT_K3,
        max_tokens=max_tokens,
        policy=OverflowPolicy.DROP_OLDEST,
    )


def test_answer_streams_into_the_store_with_its_stats(
    qtbot: QtBot, service: GenerationService, store: ConversationStore, tiny_models: TinyModels
) -> None:
    _load(qtbot, service, tiny_models)
    answers = AnswerController(service=service, store=store)
    answers.pair_label = "tiny pair"
    started: list[AnswerStarted] = []
    rounds: list[AnswerRound] = []
    answers.started.connect(started.append)
    answers.round_shown.connect(rounds.append)
    conversation_id = _conversation(store)
    with qtbot.waitSignal(answers.ended, timeout=60_000) as blocker:
        _start(answers, conversation_id, max_tokens=40)
        assert answers.active
    ended: AnswerEnded = blocker.args[0]
    assert not answers.active
    assert len(started) == 1 and started[0].message_id == ended.message_id
    assert ended.stop in (StopReason.MAX_TOKENS, StopReason.EOS) and not ended.error
    assert ended.stats is not None and ended.speed is not None and rounds
    assert all(not r.auto for r in rounds)  # a fixed mode: no policy choice to show
    stored = store.message(ended.message_id)
    assert stored.finished and stored.role == "assistant"
    assert stored.content == "".join(r.result.text for r in rounds)
    assert stored.token_kinds is not None
    assert "".join(span[0] for span in stored.token_kinds) == stored.content
    assert stored.stats is not None
    assert stored.stats["pair"] == "tiny pair"
    assert stored.stats["emitted"] == ended.stats.emitted
    assert stored.stats["stop"] == ended.stop.name


def test_stop_keeps_the_partial_answer_and_ignores_late_rounds(
    qtbot: QtBot, service: GenerationService, store: ConversationStore, tiny_models: TinyModels
) -> None:
    _load(qtbot, service, tiny_models)
    answers = AnswerController(service=service, store=store)
    rounds: list[AnswerRound] = []
    answers.round_shown.connect(rounds.append)
    _start(answers, _conversation(store), max_tokens=5000)
    qtbot.waitUntil(lambda: len(rounds) >= 3, timeout=30_000)
    # The controller ends the answer at once; the worker's own end of it comes after every
    # round it still sent, so once both arrived no late round can be pending.
    endings: list[AnswerEnded] = []
    answers.ended.connect(endings.append)
    with qtbot.waitSignals([answers.ended, service.finished], timeout=30_000):
        answers.stop()
        count = len(rounds)
    (ended,) = endings
    assert ended.stop is StopReason.CANCELLED and ended.note == "stopped"
    assert ended.speed is None  # ended on this side, not finished by the worker
    assert len(rounds) == count  # what the worker sent after the stop was not shown
    stored = store.message(ended.message_id)
    assert not stored.finished
    assert stored.content == "".join(r.result.text for r in rounds)


def test_failure_ends_the_answer_with_a_readable_error(
    qtbot: QtBot, service: GenerationService, store: ConversationStore
) -> None:
    answers = AnswerController(service=service, store=store)
    with qtbot.waitSignal(answers.ended, timeout=10_000) as blocker:
        _start(answers, _conversation(store), max_tokens=10)  # no model loaded
    ended: AnswerEnded = blocker.args[0]
    assert ended.stop is None and ended.note == "failed"
    assert "No model is loaded" in ended.error and "Traceback" not in ended.error
    assert not answers.active
    assert not store.message(ended.message_id).finished


def test_answer_controller_imports_no_widgets() -> None:
    code = (
        "import sys, specchat.ui.chat.answer; "
        "assert 'PySide6.QtWidgets' not in sys.modules, 'the answer controller imports widgets'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


#: ChatML that, like Mistral's and Llama 2's templates, refuses roles out of turn.
STRICT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant') }}"
    "{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def test_an_empty_answer_keeps_the_roles_alternating(
    qtbot: QtBot, service: GenerationService, store: ConversationStore, tmp_path: Path
) -> None:
    from specchat.tinymodels import TinySpec, write_tiny_model

    strict = write_tiny_model(tmp_path / "strict.gguf", TinySpec(chat_template=STRICT_TEMPLATE))
    request = LoadRequest(
        service.new_id(), target=strict, n_ctx=1024, target_gpu_layers=0, calibrate=False
    )
    with qtbot.waitSignal(service.loaded, timeout=30_000):
        service.load(request)
    answers = AnswerController(service=service, store=store)
    conversation_id = _conversation(store, "first question")
    # Stopped before its first round: the answer is stored empty.
    with qtbot.waitSignal(answers.ended, timeout=30_000):
        _start(answers, conversation_id, max_tokens=40)
        answers.stop()
    assert [m.content for m in store.messages(conversation_id)] == ["first question", ""]
    store.add_message(conversation_id, "user", "second question")
    with qtbot.waitSignal(answers.ended, timeout=60_000) as blocker:
        _start(answers, conversation_id, max_tokens=8)
    ended: AnswerEnded = blocker.args[0]
    assert ended.error == ""
    assert ended.stop in (StopReason.MAX_TOKENS, StopReason.EOS)


def test_an_answer_that_cannot_be_saved_ends_with_a_message(
    qtbot: QtBot, service: GenerationService, tmp_path: Path, tiny_models: TinyModels
) -> None:
    import sqlite3

    _load(qtbot, service, tiny_models)
    with ConversationStore(tmp_path / "locked.db", busy_timeout_s=0.2) as store:
        answers = AnswerController(service=service, store=store)
        conversation_id = _conversation(store)
        other = sqlite3.connect(tmp_path / "locked.db", isolation_level=None)
        try:
            with qtbot.waitSignal(answers.ended, timeout=60_000) as blocker:
                _start(answers, conversation_id, max_tokens=40)
                other.execute("BEGIN EXCLUSIVE")  # another process holds the file from here
            ended: AnswerEnded = blocker.args[0]
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert ended.error.startswith("The answer could not be saved:")
        assert "database is locked" in ended.error
        # Once the file is free again, the next answer is saved.
        store.add_message(conversation_id, "user", "again")
        with qtbot.waitSignal(answers.ended, timeout=60_000) as blocker:
            _start(answers, conversation_id, max_tokens=8)
        assert blocker.args[0].error == ""
        assert store.messages(conversation_id)[-1].finished
