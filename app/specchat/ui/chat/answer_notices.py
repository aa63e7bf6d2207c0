"""What the window says about an answer before its text: turns left out, the prompt being read."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Slot

from specchat.ui import palette as palettes
from specchat.ui.chat.answer import AnswerController, AnswerEnded, AnswerRound
from specchat.ui.chat.chat_pane import Banner
from specchat.ui.panels.status_line import StatusLine
from specchat.ui.transcript.chat_view import ChatView
from specchat.workers.generation import PromptPrepared, PromptProgress


class AnswerNotices(QObject):
    """Shows the current answer's notices: a banner when old turns were left out, and the
    prompt's reading progress (with time left) under the transcript and in the status bar
    until the first token arrives.

    Attributes:
        reading: whether prompt progress is showing.
    """

    def __init__(
        self,
        *,
        answers: AnswerController,
        banner: Banner,
        status_line: StatusLine,
        chat_view: ChatView,
        palette: Callable[[], palettes.Palette],
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._banner = banner
        self._status = status_line
        self._chat_view = chat_view
        self._palette = palette
        self.reading = False
        answers.prepared.connect(self._on_prepared)
        answers.prompt_progress.connect(self._on_prompt_progress)
        answers.round_shown.connect(self._on_round_shown)
        answers.ended.connect(self._on_ended)

    @Slot(PromptPrepared)
    def _on_prepared(self, prepared: PromptPrepared) -> None:
        if prepared.dropped:
            n = len(prepared.dropped)
            self._banner.show_message(
                f"{n} older message{'s were' if n != 1 else ' was'} left out so the conversation "
                f"fits the context window ({prepared.prompt_tokens:,} prompt tokens).",
                kind="info",
                palette=self._palette(),
            )

    @Slot(PromptProgress)
    def _on_prompt_progress(self, progress: PromptProgress) -> None:
        reading = progress.reading
        if reading.done == reading.total and not self.reading:
            return  # read at once (short, or restored from disk): nothing to watch
        self.reading = True
        self._status.show_prompt_reading(reading.done, reading.total, reading.eta_s)
        left = "" if reading.eta_s is None else f", about {max(1, round(reading.eta_s))} s left"
        self._chat_view.set_reading_note(
            f"Reading the conversation: {reading.done:,} of {reading.total:,} tokens{left}…"
        )

    @Slot(AnswerRound)
    def _on_round_shown(self, _shown: AnswerRound) -> None:
        self._end_reading("Answering…")

    @Slot(AnswerEnded)
    def _on_ended(self, _ended: AnswerEnded) -> None:
        self._end_reading(None)

    def _end_reading(self, text: str | None) -> None:
        if self.reading:
            self.reading = False
            self._status.hide_loading()
            self._chat_view.set_reading_note("")
            if text is not None:
                self._status.say(text)
