"""API conversations written to the conversation store, when the user asked for that
(setting "api.remember_chats"): each chat once, its later requests adding their new turns;
tool calls and their results in words the window shows."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from specchat.engine.templates.chat_template import ChatMessage, ToolCall
from specchat.host.chat_call import conversation_key
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

    def keep(
        self, messages: Sequence[ChatMessage], answer: str, calls: Sequence[ToolCall] = ()
    ) -> int | None:
        """Store what is new in `messages` and the answer (its text, and the tool calls it
        made); returns the conversation's id (None when the store refused: a full disk
        loses the API chat, never the answer)."""
        key = conversation_key(messages)
        try:
            conversation, stored = self._kept.get(key, (0, 0))
            if not conversation or stored > len(messages):
                question = next((m.content for m in messages if m.role == "user"), "")
                conversation = self.store.create(f"API: {question[:TITLE_CHARS]}").id
                stored = 0
            for role, text in as_stored(messages[stored:]):
                self.store.add_message(conversation, role, text)
            self.store.add_message(conversation, "assistant", with_calls(answer, calls))
        except (StoreError, KeyError):
            log.warning("an API chat could not be stored", exc_info=True)
            return None
        self._kept[key] = (conversation, len(messages) + 1)
        return conversation


def with_calls(text: str, calls: Sequence[ToolCall]) -> str:
    """An assistant turn as the window shows it: its text, then a line for each call."""
    lines = [f"Called {call.name}({call.arguments})" for call in calls]
    return "\n\n".join(part for part in (text, "\n".join(lines)) if part)


def as_stored(messages: Sequence[ChatMessage]) -> list[tuple[str, str]]:
    """Messages as the store keeps them, in the roles the window shows: a call as a line of
    its assistant turn, tool results (those in a row together) as a user turn."""
    stored: list[tuple[str, str]] = []
    results: list[str] = []
    for message in [*messages, None]:
        if message is not None and message.role == "tool":
            results.append(f"Result of {message.name or 'a tool'}:\n{message.content}")
            continue
        if results:
            stored.append(("user", "\n\n".join(results)))
            results = []
        if message is not None:
            stored.append((message.role, with_calls(message.content, message.tool_calls)))
    return stored
