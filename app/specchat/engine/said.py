"""What was said before, for drafting: the session's suffix index and the one door into it."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from contextlib import AbstractContextManager

from specchat.engine.suffix.index import Source, SuffixIndex


class SaidIndex:
    """The session's suffix index over what was said before this chat, fed through here only.

    Earlier chats (stored ones from engine/history.py, an API chat from the server's runner
    when another chat starts), attached files (the store's, `specchat generate --attach`)
    and their deletion all come through this door; the suffix drafter reads the index from
    its `LoadedPair`, never through another drafter or an attribute found at run time. The
    chat being answered is the drafter's own: it keeps the index's "this chat" in step.

    Attributes:
        index: the index the drafters are given.
    """

    def __init__(self, index: SuffixIndex | None = None) -> None:
        self.index = index if index is not None else SuffixIndex()

    def chat(self, key: Hashable, tokens: Sequence[int], *, order: float = 0.0) -> None:
        """An earlier chat, whole (replacing what `key` held); `order` ranks it for eviction,
        oldest first."""
        self.index.put(key, tokens, source=Source.HISTORY, order=order)

    def attachment(self, key: Hashable, tokens: Sequence[int], *, order: float = 0.0) -> None:
        """An attached file, a document of its own, so a draft copied from it names it."""
        self.index.put(key, tokens, source=Source.ATTACHMENT, order=order)

    def drop(self, key: Hashable) -> None:
        """A chat or file was deleted: once this returns it is never proposed again."""
        self.index.drop(key)

    def forget_chat(self) -> None:
        """From any thread: the chat being drafted from may hold deleted text; nothing of it
        is proposed again."""
        self.index.forget_chat()

    def loading(self) -> AbstractContextManager[None]:
        """Put many documents, then build once (a whole history)."""
        return self.index.deferred()

    def stored(self) -> set[Hashable]:
        """The keys of every document held."""
        return self.index.stored()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until every document put is searchable; False on timeout."""
        return self.index.wait_idle(timeout)
