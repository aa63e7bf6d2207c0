"""The transcript: messages, with each answer token coloured by how speculation produced it."""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence

from PySide6.QtCore import QEvent, QPoint, QPointF, QTimer, QUrl, Signal, Slot
from PySide6.QtGui import (
    QContextMenuEvent,
    QFont,
    QGuiApplication,
    QHelpEvent,
    QPainter,
    QPaintEvent,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextFormat,
)
from PySide6.QtWidgets import QTextBrowser, QToolTip, QWidget

from specchat.engine.types import RoundResult, TokenEvent, TokenKind
from specchat.store.attachment_records import Attachment
from specchat.store.conversations import StoredMessage
from specchat.ui import palette as palettes
from specchat.ui.transcript.attachment_blocks import Fold, fold_of, insert_attachments
from specchat.ui.transcript.line_writer import LineWriter
from specchat.ui.transcript.rich_text import (
    COPY_SCHEME,
    GHOST_PROPERTY,
    code_text,
    monospace,
    paint_note,
    paint_wrap_marks,
    plain_text_of_markdown,
    token_runs,
)
from specchat.ui.transcript.spans import Message, Part, Piece, Span, span_tooltip, spans_from_store
from specchat.ui.transcript.thinking_fold import (
    header_text,
    insert_header,
    thinking_format,
    thought_of,
)

#: Char-format property holding a token's index in ChatView's token table (absent: not a token).
TOKEN_PROPERTY = QTextFormat.Property.UserProperty + 1
#: How long rounds wait to be painted together: a fast stream becomes ~25 paints a second.
FLUSH_INTERVAL_MS = 40


class ChatView(QTextBrowser):
    """The conversation transcript.

    Streaming answers arrive one RoundResult at a time (append_round) and are painted in
    batches every FLUSH_INTERVAL_MS, so a fast stream cannot flood the event loop.

    Attributes:
        palette_: the colours in use.
        colouring: whether token kinds are tinted.
        show_rejected: whether rejected drafts are shown as struck-through ghost text.

    Signals:
        flushed(int): pending rounds were painted (how many).
    """

    flushed = Signal(int)

    def __init__(
        self,
        parent: QWidget | None = None,
        *,
        palette: palettes.Palette | None = None,
        colouring: bool = True,
        show_rejected: bool = False,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("transcript")
        self.setOpenLinks(False)
        self.setReadOnly(True)
        self.setUndoRedoEnabled(False)
        self.document().setDocumentMargin(14)
        self.palette_ = palette or palettes.current()
        self.colouring = colouring
        self.show_rejected = show_rejected
        self._messages: list[Message] = []
        self._starts: list[int] = []  # document position where each message begins
        self._tokens: list[Span] = []  # the table TOKEN_PROPERTY indexes
        self._pending: list[tuple[RoundResult, tuple[str, ...]]] = []  # with thinking tags
        self._mono = monospace()
        self._lines = LineWriter(self.document(), self.palette_, self._mono)
        self._open: set[Fold] = set()  # attachments shown whole
        self._open_thoughts: set[int] = set()  # answers whose thinking is shown
        # the last painted thinking header: its message and where its text lies
        self._thought_header: tuple[int, int, int] | None = None
        self._trim = False  # the next painted text starts a part: no leading newlines
        self._last_payload: int | None = None  # the span the last painted piece was of
        self._ghosts = 0  # ghosts painted (each ghost's format carries its number)
        self._flush_timer = QTimer(self)
        self._flush_timer.setSingleShot(True)
        self._flush_timer.setInterval(FLUSH_INTERVAL_MS)
        self._flush_timer.timeout.connect(self._on_flush_due)
        self.reading_note = ""
        self.anchorClicked.connect(self._on_anchor_clicked)

    # --- content ---------------------------------------------------------------------------
    def clear_messages(self) -> None:
        self._pending.clear()
        self._messages.clear()
        self._open.clear()
        self._open_thoughts.clear()
        self._rerender()

    def show_messages(self, messages: Sequence[StoredMessage]) -> None:
        """Show a stored conversation in place of what is shown."""
        self.clear_messages()
        for message in messages:
            if message.role == "assistant":
                self.add_answer(
                    spans_from_store(message.token_kinds, message.content),
                    finished=message.finished,
                    note=message.note,
                )
            elif message.role == "user":
                self.add_user(message.content, message.attachments)

    def add_user(self, text: str, attachments: Sequence[Attachment] = ()) -> None:
        self.flush()
        message = Message("user", [Span(text, TokenKind.PLAIN)], attachments=tuple(attachments))
        self._messages.append(message)
        self._render_message(len(self._messages) - 1, self._end_cursor())
        self._scroll_to_end()

    def add_answer(self, spans: Sequence[Span], *, finished: bool = True, note: str = "") -> None:
        """A complete (stored) answer."""
        self.flush()
        message = Message("assistant", list(spans), note=note, finished=finished)
        message.settle()
        self._messages.append(message)
        self._render_message(len(self._messages) - 1, self._end_cursor())
        self._scroll_to_end()

    def begin_answer(self) -> None:
        """Start the answer that append_round will stream into."""
        self.flush()
        self._messages.append(Message("assistant", finished=False))
        self._render_message(len(self._messages) - 1, self._end_cursor())
        self._scroll_to_end()

    def append_round(self, result: RoundResult, thinking: Sequence[str] = ()) -> None:
        """Queue a round of the streaming answer, with its events' thinking tags (none: all
        reply); painted with the next batch."""
        self._pending.append((result, tuple(thinking)))
        if not self._flush_timer.isActive():
            self._flush_timer.start()

    def end_answer(self, *, note: str = "") -> None:
        """The streaming answer is complete (or stopped: then `note` says so)."""
        self.flush()
        if not self._messages or self._messages[-1].role != "assistant":
            return
        message = self._messages[-1]
        message.finished = True
        cursor = self._end_cursor()
        index = len(self._messages) - 1
        for piece in message.settle():
            self._paint_piece(cursor, index, message, piece)
        self._update_thought_header(index, message)
        self._lines.finish(cursor)
        if note:
            message.note = note
            self._insert_note(cursor, note)
        self._scroll_to_end()

    def remove_last_answer(self) -> None:
        """Drop the last answer (regenerate replaces it)."""
        self.flush()
        if self._messages and self._messages[-1].role == "assistant":
            self._messages.pop()
            self._open_thoughts.discard(len(self._messages))
            self._rerender()

    def remove_last_exchange(self) -> None:
        """Drop the last answer and the message it answered (a message that was refused)."""
        self.flush()
        for role in ("assistant", "user"):
            if self._messages and self._messages[-1].role == role:
                self._messages.pop()
        self._rerender()

    def set_palette(self, palette: palettes.Palette) -> None:
        self.palette_ = palette
        self._lines.palette = palette
        self._rerender()

    def set_colouring(self, on: bool) -> None:
        self.colouring = on
        self._rerender()

    def set_show_rejected(self, on: bool) -> None:
        self.show_rejected = on
        self._rerender()

    # --- reading back ---------------------------------------------------------------------
    def message_count(self) -> int:
        return len(self._messages)

    def answer_index(self, index: int = -1) -> int | None:
        """Index of the `index`-th assistant message (negative counts from the end)."""
        answers = [i for i, m in enumerate(self._messages) if m.role == "assistant"]
        try:
            return answers[index]
        except IndexError:
            return None

    def answer_markdown(self, index: int = -1) -> str:
        found = self.answer_index(index)
        return "" if found is None else self._messages[found].text

    def answer_plain_text(self, index: int = -1) -> str:
        return plain_text_of_markdown(self.answer_markdown(index))

    def painted_spans(self, index: int = -1) -> list[tuple[str, TokenKind, TokenEvent | None]]:
        """The answer's token spans as the document holds them (read back, not the model).

        Consecutive characters carrying the same token index form one span; ghost text is
        skipped. Tokens whose text is empty (half a UTF-8 character) paint nothing.
        """
        self.flush()
        found = self.answer_index(index)
        if found is None:
            return []
        start = self._starts[found]
        end = self._starts[found + 1] if found + 1 < len(self._starts) else None
        spans = token_runs(self.document(), start, end, TOKEN_PROPERTY)
        return [(text, self._tokens[t].kind, self._tokens[t].event) for t, text in spans]

    def tooltip_at(self, pos: QPoint) -> str:
        """The tooltip a token at viewport position `pos` shows ("" off any token)."""
        cursor = self.cursorForPosition(pos)
        if not cursor.atBlockEnd():
            cursor.movePosition(QTextCursor.MoveOperation.NextCharacter)
        return self.tooltip_for_format(cursor.charFormat())

    def tooltip_for_format(self, fmt: QTextCharFormat) -> str:
        """Kind, round, position, p_target and p_draft of the token `fmt` belongs to."""
        if fmt.property(GHOST_PROPERTY):
            return fmt.toolTip()
        token = fmt.property(TOKEN_PROPERTY)
        if token is None or not 0 <= int(token) < len(self._tokens):
            return ""
        return span_tooltip(self._tokens[int(token)])

    def paintEvent(self, event: QPaintEvent) -> None:
        super().paintEvent(event)
        # Mark where a long code line wraps, so a continuation never reads as a new line.
        painter = QPainter(self.viewport())
        offset = QPointF(-self.horizontalScrollBar().value(), -self.verticalScrollBar().value())
        first = self.cursorForPosition(QPoint(0, 0)).block()
        paint_wrap_marks(
            painter,
            self.document(),
            first,
            offset=offset,
            bottom=self.viewport().height(),
            colour=self.palette_.muted_text,
        )
        if self.reading_note:  # painted under the text, never part of the document
            paint_note(
                painter,
                self.document(),
                self.reading_note,
                offset=offset,
                colour=self.palette_.muted_text,
            )
        painter.end()

    def set_reading_note(self, note: str) -> None:
        """A line under the last message while its answer has no text yet ("" removes it)."""
        self.reading_note = note
        self.viewport().update()

    @Slot(QUrl)
    def _on_anchor_clicked(self, url: QUrl) -> None:
        if url.scheme() == COPY_SCHEME:
            QGuiApplication.clipboard().setText(code_text(self.document(), int(url.path())))
        elif (fold := fold_of(url)) is not None:  # open or shut an attachment, in place
            self._open ^= {fold}
            at = self.verticalScrollBar().value()
            self._rerender()
            self.verticalScrollBar().setValue(at)
        elif (thought := thought_of(url)) is not None:  # open or shut a thinking block
            self.flush()
            self._open_thoughts ^= {thought}
            at = self.verticalScrollBar().value()
            self._rerender()
            self.verticalScrollBar().setValue(at)

    def viewportEvent(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip:
            assert isinstance(event, QHelpEvent)
            text = self.tooltip_at(event.pos())
            if text:
                QToolTip.showText(event.globalPos(), text, self.viewport())
            else:
                QToolTip.hideText()
                event.ignore()
            return True
        return super().viewportEvent(event)

    # --- painting -----------------------------------------------------------------------
    @Slot()
    def _on_flush_due(self) -> None:
        self.flush()

    def flush(self) -> None:
        """Paint every queued round now, in one edit block."""
        if not self._pending:
            return
        self._flush_timer.stop()
        rounds, self._pending = self._pending, []
        if not self._messages or self._messages[-1].role != "assistant":
            return
        message = self._messages[-1]
        bar = self.verticalScrollBar()
        at_end = bar.value() >= bar.maximum() - 4
        cursor = self._end_cursor()
        cursor.beginEditBlock()
        index = len(self._messages) - 1
        for result, thinking in rounds:
            for span in self._spans_of(message, result, thinking):
                for piece in message.add(span):
                    self._paint_piece(cursor, index, message, piece)
        self._update_thought_header(index, message)
        cursor.endEditBlock()
        if at_end:
            self._scroll_to_end()
        self.flushed.emit(len(rounds))

    def _rerender(self) -> None:
        self._pending_to_model()
        doc = self.document()
        doc.clear()
        self._starts.clear()
        self._tokens.clear()
        self._thought_header = None
        cursor = QTextCursor(doc)
        cursor.beginEditBlock()
        for index in range(len(self._messages)):
            self._render_message(index, cursor)
        cursor.endEditBlock()
        self._scroll_to_end()

    def _pending_to_model(self) -> None:
        """Move queued rounds into the model without painting (a re-render paints them)."""
        if not self._pending or not self._messages:
            self._pending.clear()
            return
        message = self._messages[-1]
        for result, thinking in self._pending:
            for span in self._spans_of(message, result, thinking):
                message.add(span)
        self._pending.clear()

    @staticmethod
    def _spans_of(
        message: Message, result: RoundResult, thinking: tuple[str, ...]
    ) -> Iterator[Span]:
        """A round's spans, each with its thinking tag; its ghost noted as each is added."""
        for n, event in enumerate(result.events):
            if event.kind == TokenKind.CORRECTED and result.rejected_text:
                message.ghosts[len(message.spans)] = result.rejected_text
            tag = thinking[n] if n < len(thinking) else ""
            yield Span(event.text, event.kind, event, tag)

    def _render_message(self, index: int, cursor: QTextCursor) -> None:
        message = self._messages[index]
        pal = self.palette_
        cursor.movePosition(QTextCursor.MoveOperation.End)
        header_block = QTextBlockFormat()
        header_block.setTopMargin(0 if index == 0 else 14)
        header_block.setBottomMargin(4)
        header = QTextCharFormat()
        header.setFontWeight(QFont.Weight.Bold)
        header.setForeground(pal.muted_text)
        if self.document().isEmpty() and index == 0:
            cursor.setBlockFormat(header_block)
        else:
            cursor.insertBlock(header_block, header)
        self._starts.append(cursor.position())
        cursor.insertText("You" if message.role == "user" else "Assistant", header)
        body = QTextBlockFormat()
        body.setLeftMargin(2)
        cursor.insertBlock(body, QTextCharFormat())
        self._lines.start(cursor.position())
        if message.role == "user":  # Markdown as in answers, without token formats
            insert_attachments(cursor, message.attachments, index, self._open, pal, self._mono)
            self._lines.start(cursor.position())
            for n, line in enumerate(message.text.split("\n")):
                if n:
                    self._lines.end(cursor, QTextCharFormat())
                if line:
                    self._lines.insert(cursor, line, QTextCharFormat())
            self._lines.finish(cursor)
            return
        self._last_payload, self._trim = None, False
        for piece in message.pieces:
            self._paint_piece(cursor, index, message, piece)
        self._update_thought_header(index, message)
        if message.finished:
            self._lines.finish(cursor)
        if message.note:
            self._insert_note(cursor, message.note)

    def _token_format(self, index: int, span: Span) -> QTextCharFormat:
        fmt = QTextCharFormat()
        fmt.setProperty(TOKEN_PROPERTY, index)
        pal = self.palette_
        if self.colouring:
            background = pal.token_background.get(span.kind)
            if background is not None:
                fmt.setBackground(background)
            if span.kind == TokenKind.CORRECTED:
                fmt.setUnderlineStyle(QTextCharFormat.UnderlineStyle.SingleUnderline)
                fmt.setUnderlineColor(pal.token_accent[TokenKind.CORRECTED])
            elif span.kind == TokenKind.BONUS:
                fmt.setUnderlineStyle(QTextCharFormat.UnderlineStyle.DotLine)
                fmt.setUnderlineColor(pal.token_accent[TokenKind.BONUS])
        # No per-token tooltip text in the format: it would make every format heavier and
        # slow painting a fast stream; viewportEvent builds it on hover from the token table.
        return fmt

    def _paint_piece(self, cursor: QTextCursor, index: int, message: Message, piece: Piece) -> None:
        """Paint one piece of the `index`-th message: its thinking under a header that
        folds it open, the reply after it, the markup around the thinking never."""
        is_open = index in self._open_thoughts
        if piece.part is Part.OPENING:
            header = self._thought_header
            if header is None or header[0] != index:
                text = header_text(0, thinking_now=True, is_open=is_open)
                self._thought_header = (index, *insert_header(cursor, text, index, self.palette_))
                if is_open:
                    self._new_body_block(cursor)
                self._trim = True
            return
        if piece.part is Part.CLOSING:
            if is_open:
                self._lines.finish(cursor)
            if not (is_open and self._lines.blank(cursor)):  # thinking that ended its line
                self._new_body_block(cursor)
            self._trim = True
            return
        if piece.part is Part.THINKING and not is_open:
            return
        ghost = message.ghosts.get(piece.payload)
        if ghost is not None and self.show_rejected and piece.payload != self._last_payload:
            self._insert_ghost(cursor, ghost)
        self._last_payload = piece.payload
        text = piece.text.lstrip("\n") if self._trim else piece.text
        if not text:
            return
        self._trim = False
        span = message.spans[piece.payload]
        thinking = piece.part is Part.THINKING
        self._insert_span(cursor, Span(text, span.kind, span.event), thinking=thinking)

    def _update_thought_header(self, index: int, message: Message) -> None:
        """Rewrite the `index`-th message's thinking header with its count and state."""
        header = self._thought_header
        if header is None or header[0] != index:
            return
        _, start, end = header
        text = header_text(
            message.thinking_tokens,
            thinking_now=message.thinking_now and not message.finished,
            is_open=index in self._open_thoughts,
        )
        cursor = QTextCursor(self.document())
        cursor.setPosition(start)
        cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
        fmt = cursor.charFormat()
        cursor.insertText(text, fmt)
        self._thought_header = (index, start, cursor.position())
        self._lines.moved(after=end, by=cursor.position() - end)

    def _new_body_block(self, cursor: QTextCursor) -> None:
        body = QTextBlockFormat()
        body.setLeftMargin(2)
        cursor.insertBlock(body, QTextCharFormat())
        self._lines.start(cursor.position())

    def _insert_span(self, cursor: QTextCursor, span: Span, *, thinking: bool = False) -> None:
        index = len(self._tokens)
        self._tokens.append(span)
        fmt = self._token_format(index, span)
        if thinking:
            fmt = thinking_format(fmt, self.palette_)
        for n, piece in enumerate(span.text.split("\n")):
            if n:
                self._lines.end(cursor, fmt)
            if piece:
                self._lines.insert(cursor, piece, fmt)

    def _insert_ghost(self, cursor: QTextCursor, text: str) -> None:
        fmt = QTextCharFormat()
        fmt.setFontStrikeOut(True)
        fmt.setForeground(self.palette_.ghost)
        # numbered, so that two ghosts side by side stay two fragments (Qt merges fragments
        # of equal formats), each with its own tooltip
        self._ghosts += 1
        fmt.setProperty(GHOST_PROPERTY, self._ghosts)
        fmt.setToolTip(f"rejected draft: {text!r}")
        # A newline in ghost text would break the layout of the real text around it.
        cursor.insertText(text.replace("\n", "⏎"), fmt)

    def _insert_note(self, cursor: QTextCursor, note: str) -> None:
        block = QTextBlockFormat()
        block.setTopMargin(4)
        fmt = QTextCharFormat()
        fmt.setFontItalic(True)
        fmt.setForeground(self.palette_.muted_text)
        cursor.insertBlock(block, fmt)
        cursor.insertText(f"({note})", fmt)
        self._lines.start(cursor.position())

    def _end_cursor(self) -> QTextCursor:
        cursor = QTextCursor(self.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        return cursor

    def _scroll_to_end(self) -> None:
        bar = self.verticalScrollBar()
        bar.setValue(bar.maximum())

    # --- copying ------------------------------------------------------------------------
    def message_at(self, position: int) -> int | None:
        """Index of the message holding document position `position`."""
        found = bisect.bisect_right(self._starts, position) - 1
        return found if found >= 0 else None

    def contextMenuEvent(self, event: QContextMenuEvent) -> None:
        menu = self.createStandardContextMenu(event.pos())
        position = self.cursorForPosition(event.pos()).position()
        index = self.message_at(position)
        if index is None or self._messages[index].role != "assistant":
            index = self.answer_index(-1)
        if index is not None:
            text = self._messages[index].text
            menu.addSeparator()
            menu.addAction(
                "Copy answer as Markdown", lambda: QGuiApplication.clipboard().setText(text)
            )
            menu.addAction(
                "Copy answer as plain text",
                lambda: QGuiApplication.clipboard().setText(plain_text_of_markdown(text)),
            )
        menu.exec(event.globalPos())
