"""Earlier conversations from the store, kept in step in the session's suffix index."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from specchat.engine.said import SaidIndex
from specchat.engine.templates.chat_template import ChatMessage
from specchat.engine.templates.guards import ChatTemplateError
from specchat.engine.templates.prompt_tokens import PromptTokenizer
from specchat.store.changes import ChangeKind, StoreChange
from specchat.store.conversations import ConversationStore, StoredMessage

if TYPE_CHECKING:
    from specchat.engine.session import ChatEngine

#: Renders and tokenizes one conversation's messages (the target's chat template and
#: tokenizer, so stored text matches the live prompt token for token).
Tokenize = Callable[[Sequence[StoredMessage]], Sequence[int]]
#: Tokenizes an attachment's text (the target's tokenizer, as the prompt holds it).
TokenizeText = Callable[[str], Sequence[int]]

#: First part of an attachment's key in the index: (ATTACHMENT_KEY, message id, position).
ATTACHMENT_KEY = "attachment"
AttachmentKey = tuple[str, int, int]


class Said(Protocol):
    """A message as far as drafting cares: who said what."""

    @property
    def role(self) -> str: ...
    @property
    def content(self) -> str: ...


def template_tokenizer(prompt: PromptTokenizer) -> Callable[[Sequence[Said]], list[int]]:
    """A Tokenize rendering through the chat template, as prompts are (the messages' text
    read as text, never as control tokens)."""

    def render(messages: Sequence[Said]) -> list[int]:
        chat = [ChatMessage(m.role, m.content) for m in messages]
        return prompt.tokens(chat, add_generation_prompt=False)

    return render


class StoredHistory:
    """Feeds the session's suffix index the user's earlier conversations, and keeps it in
    step (through its door, `SaidIndex`).

    Everything is read and tokenized on a background thread, so loading never holds up an
    answer. A conversation moved to the bin is dropped from the index before the store's
    delete() returns, and a load in flight for it is discarded: its text can never come back
    as a draft. Unfinished answers are left out (they may still be streaming). Each file
    attached to a message is a document of its own (Source.ATTACHMENT), dropped before the
    store's delete_message() or delete() returns.

    Attributes:
        store: the conversation store.
        said: the door of the suffix index fed.
    """

    def __init__(
        self,
        store: ConversationStore,
        said: SaidIndex,
        tokenize: Tokenize,
        *,
        tokenize_text: TokenizeText | None = None,
    ) -> None:
        self.store = store
        self.said = said
        self._tokenize = tokenize
        self._tokenize_text = tokenize_text
        # Attachment keys in the index, by conversation.
        self._attached: dict[int, set[AttachmentKey]] = {}
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._queue: list[int] = []
        self._deleted: set[int] = set()
        self._closed = False
        self._busy = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Subscribe to the store and load every conversation in the background."""
        self.store.subscribe(self._on_change)
        with self._wake:
            self._queue.extend(c.id for c in self.store.conversations())
            self._thread = threading.Thread(target=self._run, name="stored-history", daemon=True)
            self._thread.start()

    def close(self) -> None:
        self.store.unsubscribe(self._on_change)
        with self._wake:
            self._closed = True
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until every queued conversation is loaded and indexed; False on timeout."""
        with self._wake:
            if not self._wake.wait_for(lambda: not self._queue and not self._busy, timeout):
                return False
        return self.said.wait_idle(timeout)

    def _on_change(self, change: StoreChange) -> None:
        with self._wake:
            key = change.conversation_id
            if change.kind == ChangeKind.DELETED:
                self._deleted.add(key)
                self.said.drop(key)
                self._drop_attachments(key, self._attached.pop(key, set()))
                # The chat being drafted from may be the deleted one.
                self.said.forget_chat()
                return
            if change.kind == ChangeKind.MESSAGES and self._attached.get(key):
                self._forget_erased_attachments(key)
            if change.kind == ChangeKind.RESTORED:
                self._deleted.discard(key)
            if key not in self._queue:
                self._queue.append(key)
            self._wake.notify_all()

    def _drop_attachments(self, key: int, gone: set[AttachmentKey]) -> None:
        for found in gone:
            self.said.drop(found)
        if gone:
            self._attached[key] = self._attached.get(key, set()) - gone

    def _forget_erased_attachments(self, key: int) -> None:
        """A message was erased: its attachments leave the index now, and so does this chat
        (the prompt it indexed held their text)."""
        try:
            kept = {m.id for m in self.store.messages(key)}
        except KeyError:
            kept = set()
        gone = {found for found in self._attached[key] if found[1] not in kept}
        if gone:
            self._drop_attachments(key, gone)
            self.said.forget_chat()

    def _run(self) -> None:
        # The whole history first, built once at the end rather than shard by shard.
        with self.said.loading():
            self._drain()
        while True:
            with self._wake:
                self._wake.wait_for(lambda: bool(self._queue) or self._closed)
                if self._closed:
                    return
            self._drain()

    def _drain(self) -> None:
        while True:
            with self._wake:
                if not self._queue or self._closed:
                    return
                key = self._queue.pop(0)
                self._busy = True
            try:
                self._load(key)
            finally:
                with self._wake:
                    self._busy = False
                    self._wake.notify_all()

    def _load(self, key: int) -> None:
        try:
            conversation = self.store.get(key)
            messages = [m for m in self.store.messages(key) if m.finished]
        except KeyError:
            conversation, messages = None, []
        try:
            tokens = list(self._tokenize(messages)) if messages else []
        except (ChatTemplateError, ValueError):
            tokens = []  # a conversation the template refuses is simply not drawn on
        files = self._attachment_tokens(key, messages)
        with self._lock:
            known = self._attached.get(key, set())
            # Deleted while it was being read: it must not come back.
            if key in self._deleted or conversation is None or conversation.deleted is not None:
                self.said.drop(key)
                self._drop_attachments(key, known)
                return
            if tokens:
                self.said.chat(key, tokens, order=conversation.updated)
            else:
                self.said.drop(key)
            self._drop_attachments(key, known - set(files))
            for found, text_tokens in files.items():
                if text_tokens is not None:
                    self.said.attachment(found, text_tokens, order=conversation.updated)
            # One erased while this was read is not in `known` any more, nor indexed.
            self._attached[key] = {f for f, t in files.items() if t is not None or f in known}

    def _attachment_tokens(
        self, key: int, messages: Sequence[StoredMessage]
    ) -> dict[AttachmentKey, Sequence[int] | None]:
        """Every attachment's key, with its tokens when it is not indexed already (None)."""
        if self._tokenize_text is None:
            return {}
        with self._lock:
            known = set(self._attached.get(key, set()))
        files: dict[AttachmentKey, Sequence[int] | None] = {}
        for message in messages:
            for position, attachment in enumerate(message.attachments):
                found = (ATTACHMENT_KEY, message.id, position)
                files[found] = None if found in known else self._tokenize_text(attachment.text)
        return files


def text_tokenizer(engine: ChatEngine) -> TokenizeText:
    """An attachment's text as the prompt holds it: text, never control tokens."""

    def tokenize(text: str) -> list[int]:
        return engine.target.tokenize(text, add_special=False, parse_special=False)

    return tokenize


def attach_history(store: ConversationStore | None, engine: ChatEngine) -> StoredHistory | None:
    """Feed the engine's suffix index the stored conversations (started; close() it when the
    engine goes), or None when there is no store."""
    if store is None:
        return None
    history = StoredHistory(
        store,
        engine.said,
        template_tokenizer(engine.prompt_tokens),
        tokenize_text=text_tokenizer(engine),
    )
    history.start()
    return history
