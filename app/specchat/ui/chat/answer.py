"""The answer controller: streams one answer into the store, with partial saves; no widgets."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot

from specchat.engine.attachments import Attachment, attached_message
from specchat.engine.context import OverflowPolicy
from specchat.engine.decoding.kept_sources import KeptSource, KeptSources
from specchat.engine.drafting.registry import AUTO
from specchat.engine.templates.chat_template import ChatMessage
from specchat.engine.types import Controls, RoundResult, Stats, StopReason
from specchat.store.conversations import (
    ConversationStore,
    StoredMessage,
    StoreError,
    answer_parts,
)
from specchat.ui.panels.figures import SpeedFigures
from specchat.workers.generation import (
    Failure,
    GenerateRequest,
    GenerationFinished,
    PlainBaseline,
    PromptPrepared,
    PromptProgress,
    RoundUpdate,
)
from specchat.workers.generation_service import GenerationService

#: Least time between two saves of a streaming answer.
PARTIAL_SAVE_S = 0.5
#: Notes shown under an answer that ended other than by finishing.
STOP_NOTES = {
    StopReason.MAX_TOKENS: "token limit reached",
    StopReason.CONTEXT_FULL: "context window full",
    StopReason.CANCELLED: "stopped",
}


@dataclass(frozen=True)
class AnswerStarted:
    """An answer was requested; its (empty) message is stored.

    Attributes:
        request_id: the GenerateRequest's id.
        conversation_id: its conversation.
        message_id: the stored assistant message it streams into.
    """

    request_id: int
    conversation_id: int
    message_id: int


@dataclass(frozen=True)
class AnswerRound:
    """A round of the current answer, with the figures to show for it.

    Attributes:
        result: the engine's round.
        speed: the answer's rate so far next to the plain baseline.
        auto: whether the auto policy is choosing the drafting (to show its choice).
        kept: the answer's kept draft tokens so far by source, most first.
        thinking: each event's thinking tag (RoundUpdate.thinking).
    """

    result: RoundResult
    speed: SpeedFigures
    auto: bool
    kept: tuple[KeptSource, ...] = ()
    thinking: tuple[str, ...] = ()


@dataclass(frozen=True)
class AnswerEnded:
    """The current answer ended and what was written is stored.

    Attributes:
        conversation_id: its conversation.
        message_id: the stored message.
        stop: why it ended; None when it failed.
        stats: its totals; None when it ended before any round.
        speed: the final figures when the worker finished it; None when it ended on this side
            (stopped, failed, model switch).
        note: shown under the answer ("" when it simply finished).
        error: the failure message, meant for people; "" when it did not fail.
        returned: the user's message, taken back out of the conversation because it was
            refused before any answer (it goes back to the composer); "" otherwise.
        returned_attachments: that message's attachments, going back with it.
    """

    conversation_id: int
    message_id: int
    stop: StopReason | None
    stats: Stats | None
    speed: SpeedFigures | None
    note: str
    error: str = ""
    returned: str = ""
    returned_attachments: tuple[Attachment, ...] = ()

    @property
    def gave_back(self) -> bool:
        """Whether the message was taken back for the composer."""
        return bool(self.returned or self.returned_attachments)


@dataclass(frozen=True)
class AnswerDone:
    """An answer ended and was stored; what the window reports with its latency.

    Attributes:
        conversation_id: its conversation.
        message_id: the stored message.
        stop: why it ended.
        stats: its totals (None when it failed before any round).
        latency_worst_ms: the event-loop probe's worst lateness during the answer.
    """

    conversation_id: int
    message_id: int
    stop: StopReason | None
    stats: Stats | None
    latency_worst_ms: float


@dataclass
class _Answer:
    """The answer being streamed."""

    request_id: int
    conversation_id: int
    message_id: int
    auto: bool
    spans: list[tuple[str, ...]] = field(default_factory=list)  # text, kind[, thinking tag]
    text: list[str] = field(default_factory=list)
    stats: Stats | None = None
    baseline: PlainBaseline | None = None
    last_save: float = 0.0
    asked: StoredMessage | None = None  # the message to give back if it is refused
    kept: KeptSources = field(default_factory=KeptSources)


def _not_saved(failure: StoreError) -> str:
    return f"The answer could not be saved: {failure}."


def acceptance_totals(messages: Iterable[StoredMessage]) -> tuple[int, int]:
    """Accepted and drafted tokens over the stored answers' stats records."""
    accepted = drafted = 0
    for message in messages:
        if message.stats:
            accepted += _count(message.stats.get("accepted"))
            drafted += _count(message.stats.get("drafted"))
    return accepted, drafted


def _count(value: object) -> int:
    """A stored count; anything else (a record edited or damaged by hand) counts nothing."""
    return int(value) if isinstance(value, (int, float)) and math.isfinite(value) else 0


def chat_history(stored: Iterable[StoredMessage]) -> list[ChatMessage]:
    """The conversation as the model sees it, with user and assistant turns alternating.

    An answer that failed or was stopped before its first token is stored empty. Dropping
    it would put two user messages in a row, which templates that insist on alternating
    roles (Mistral, Llama 2, Gemma) refuse for every later turn: an empty assistant turn
    stands in its place.

    An answer's thinking goes to the template apart (`reasoning_content`), as llama.cpp's
    server hands it over: the template writes it where its model expects it, or drops it.
    """
    history: list[ChatMessage] = []
    for message in stored:
        if message.role == "assistant" and not message.content:
            continue
        if message.role == "user" and history and history[-1].role == "user":
            history.append(ChatMessage("assistant", ""))
        if message.role == "assistant":
            thinking, reply = answer_parts(message.token_kinds, message.content)
            if thinking or reply != message.content:
                history.append(ChatMessage("assistant", reply, reasoning_content=thinking))
                continue
        history.append(attached_message(message.role, message.content, message.attachments))
    return history


def _speed(stats: Stats, baseline: PlainBaseline | None) -> SpeedFigures:
    return SpeedFigures(
        stats.tokens_per_s,
        baseline.tokens_per_s if baseline else None,
        baseline.source if baseline else "",
        emitted=stats.emitted,
        drafted=stats.drafted,
    )


class AnswerController(QObject):
    """One answer at a time: sends the request, saves partial text, stores the end and stats.

    Holds no widgets: the window shows what the signals carry. Payloads of answers that are
    no longer current (stopped, replaced) are ignored here, so the window never sees them.

    Attributes:
        service: the generation worker and its thread.
        store: where the answer is saved as it streams and when it ends.
        pair_label: the loaded pair's name, written into each answer's stats record.

    Signals:
        started(AnswerStarted): an answer was requested.
        prepared(PromptPrepared): the current answer's prompt was rendered.
        prompt_progress(PromptProgress): the current answer's long prompt is being read.
        round_shown(AnswerRound): a round of the current answer arrived.
        ended(AnswerEnded): the current answer ended (finished, stopped or failed), stored.
    """

    started = Signal(AnswerStarted)
    prepared = Signal(PromptPrepared)
    prompt_progress = Signal(PromptProgress)
    round_shown = Signal(AnswerRound)
    ended = Signal(AnswerEnded)

    def __init__(
        self,
        *,
        service: GenerationService,
        store: ConversationStore,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.service = service
        self.store = store
        self.pair_label = ""
        self._answer: _Answer | None = None
        service.prepared.connect(self._on_prepared)
        service.prompt_progress.connect(self._on_prompt_progress)
        service.round_ready.connect(self._on_round_ready)
        service.finished.connect(self._on_finished)
        service.failed.connect(self._on_failed)

    @property
    def active(self) -> bool:
        """Whether an answer is streaming."""
        return self._answer is not None

    def start(
        self,
        conversation_id: int,
        *,
        controls: Controls,
        max_tokens: int,
        policy: OverflowPolicy,
        give_back: bool = False,
        thinking: bool | None = None,
    ) -> None:
        """Answer the stored conversation's last user message (`thinking`: the template's
        thinking switch, None where it has none).

        With `give_back`, a message refused before any answer (it does not fit the context,
        no model) is taken back out of the conversation, for the composer.
        """
        stored_messages = self.store.messages(conversation_id)
        history = chat_history(stored_messages)
        asked = stored_messages[-1] if stored_messages and give_back else None
        stored = self.store.begin_assistant_message(conversation_id)
        answer = _Answer(
            request_id=self.service.new_id(),
            conversation_id=conversation_id,
            message_id=stored.id,
            auto=controls.mode == AUTO,
            asked=asked if asked is not None and asked.role == "user" else None,
        )
        self._answer = answer
        request = GenerateRequest(
            answer.request_id,
            tuple(history),
            max_tokens=max_tokens,
            controls=controls,
            policy=policy,
            conversation_id=conversation_id,
            thinking=thinking,
        )
        self.started.emit(AnswerStarted(answer.request_id, conversation_id, stored.id))
        self.service.generate(request)

    def set_auto(self, auto: bool) -> None:
        """The mode changed mid-answer: show (or stop showing) the auto policy's choice."""
        if self._answer is not None:
            self._answer.auto = auto

    def stop(self) -> None:
        """Stop the answer now; what was written so far is kept (marked unfinished)."""
        if self._answer is not None:
            self.service.stop()
            self.end_locally(StopReason.CANCELLED, note="stopped")

    def end_locally(self, stop: StopReason | None, *, note: str, error: str = "") -> None:
        """End the answer on this side (stop, failure, model switch): keep it unfinished."""
        answer = self._answer
        if answer is None:
            return
        self._answer = None
        text = "".join(answer.text)
        try:
            self.store.update_partial(answer.message_id, text, token_kinds=answer.spans)
        except StoreError as failure:
            error = " ".join(filter(None, (error, _not_saved(failure))))
        self.ended.emit(
            AnswerEnded(
                answer.conversation_id,
                answer.message_id,
                stop,
                answer.stats,
                None,
                note,
                error,
            )
        )

    def _current(self, request_id: int | None) -> _Answer | None:
        answer = self._answer
        if answer is None or request_id != answer.request_id:
            return None  # a cancelled request's late payloads
        return answer

    @Slot(PromptPrepared)
    def _on_prepared(self, prepared: PromptPrepared) -> None:
        answer = self._current(prepared.request_id)
        if answer is None:
            return
        self.prepared.emit(prepared)

    @Slot(PromptProgress)
    def _on_prompt_progress(self, progress: PromptProgress) -> None:
        if self._current(progress.request_id) is not None:
            self.prompt_progress.emit(progress)

    @Slot(RoundUpdate)
    def _on_round_ready(self, update: RoundUpdate) -> None:
        answer = self._current(update.request_id)
        if answer is None:
            return
        result = update.result
        answer.stats = result.stats
        answer.baseline = update.baseline
        tags = update.thinking
        for n, event in enumerate(result.events):
            tag = tags[n] if n < len(tags) else ""
            # the tag only where there is one: a reply's token is stored as before
            answer.spans.append(
                (event.text, event.kind.name, tag) if tag else (event.text, event.kind.name)
            )
        answer.text.append(result.text)
        answer.kept.add(result)
        speed = _speed(result.stats, update.baseline)
        self.round_shown.emit(AnswerRound(result, speed, answer.auto, answer.kept.counts(), tags))
        now = time.monotonic()
        if now - answer.last_save >= PARTIAL_SAVE_S:
            answer.last_save = now
            # A partial save that fails (a full disk, a locked file) is not the answer's end:
            # the next one, or the final save, tries again and reports.
            with contextlib.suppress(StoreError):
                self.store.update_partial(
                    answer.message_id, "".join(answer.text), token_kinds=answer.spans
                )

    @Slot(GenerationFinished)
    def _on_finished(self, finished: GenerationFinished) -> None:
        answer = self._current(finished.request_id)
        if answer is None:
            return
        stats = finished.stats if finished.stats.rounds else (answer.stats or finished.stats)
        self._answer = None
        speed = _speed(stats, finished.baseline)
        error = ""
        try:
            self.store.finish_message(
                answer.message_id,
                "".join(answer.text),
                stats=self.stats_record(stats, finished.stop, speed),
                token_kinds=answer.spans,
            )
        except StoreError as failure:
            error = _not_saved(failure)
        self.ended.emit(
            AnswerEnded(
                answer.conversation_id,
                answer.message_id,
                finished.stop,
                stats,
                speed,
                STOP_NOTES.get(finished.stop, ""),
                error,
            )
        )

    @Slot(Failure)
    def _on_failed(self, failure: Failure) -> None:
        if failure.load_id is not None or self._current(failure.request_id) is None:
            return  # a load's failure (the window's) or a cancelled request's
        answer = self._answer
        if answer is not None and answer.asked is not None and answer.stats is None:
            # Refused before a single token: the message goes back to the composer rather
            # than staying in the transcript under an empty "(failed)" answer.
            self._answer = None
            self.store.delete_message(answer.message_id)
            self.store.delete_message(answer.asked.id)
            self.ended.emit(
                AnswerEnded(
                    answer.conversation_id,
                    answer.message_id,
                    None,
                    None,
                    None,
                    "",
                    failure.message.rstrip(".")
                    + ". Your message was not sent: it is back in the message box.",
                    returned=answer.asked.content,
                    returned_attachments=answer.asked.attachments,
                )
            )
            return
        self.end_locally(None, note="failed", error=failure.message)

    def stats_record(self, stats: Stats, stop: StopReason, speed: SpeedFigures) -> dict[str, Any]:
        """What the store keeps about a finished answer."""
        return {
            "alpha": stats.alpha,
            "tau": stats.tau,
            "tokens_per_s": stats.tokens_per_s,
            "drafted": stats.drafted,
            "accepted": stats.accepted,
            "emitted": stats.emitted,
            "rounds": stats.rounds,
            "plain_tokens_per_s": speed.plain_tokens_per_s,
            "plain_source": speed.plain_source,
            "speedup": speed.speedup,
            "stop": stop.name,
            "pair": self.pair_label,
        }
