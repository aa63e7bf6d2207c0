"""API conversations written to the conversation store, when the user asked for that
(setting "api.remember_chats"): each chat once, its later requests adding their new turns."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from specchat.engine.templates.chat_template import ChatMessage
from specchat.serve.parsing import conversation_key
from specchat.store.conversations import ConversationStore, StoreError

log = logging.getLogger(__name__)

#: Characters of the first question a kept chat's title holds.
TITLE_CHARS = 48


class ChatKeeper:
    """Writes API chats to `store`.

    Attributes:
        store: where they go.
    """

    def __init__(self, store: ConversationStore) -> None:
        self.store = store
        # Per chat (see conversation_key): its conversation id and the messages stored.
        self._kept: dict[str, tuple[int, int]] = {}

    def keep(self, messages: Sequence[ChatMessage], answer: str) -> int | None:
        """Store what is new in `messages` and the answer; returns the conversation's id
        (None when the store refused: a full disk loses the API chat, never the answer)."""
        key = conversation_key(messages)
        try:
            conversation, stored = self._kept.get(key, (0, 0))
            if not conversation or stored > len(messages):
                question = next((m.content for m in messages if m.role == "user"), "")
                conversation = self.store.create(f"API: {question[:TITLE_CHARS]}").id
                stored = 0
            for message in messages[stored:]:
                self.store.add_message(conversation, message.role, message.content)
            self.store.add_message(conversation, "assistant", answer)
        except (StoreError, KeyError):
            log.warning("an API chat could not be stored", exc_info=True)
            return None
        self._kept[key] = (conversation, len(messages) + 1)
        return conversation
