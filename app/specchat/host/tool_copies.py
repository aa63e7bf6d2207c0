"""Tool results filed in the suffix index as a call's arguments quote them: JSON-escaped.

An agent's model reads a file through a tool and writes it back, edited, inside a call's
JSON arguments, its newlines written `\\n` and its quotes `\\"`. The chat holds the file as
it was read, so a copy from it breaks at the first line's end; the escaped text, filed as
a document beside the chat, is what the call repeats."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

# One spelling of a JSON string's inside for every copy (the drafters' views use it too).
from specchat.engine.drafting.copies.views import escaped

if TYPE_CHECKING:
    from specchat.engine.session import ChatEngine
    from specchat.engine.templates.chat_message import ChatMessage

#: First part of a tool result's key in the index: (KEY, chat, the message's position).
KEY = "api-tool-result"


def file_tool_results(engine: ChatEngine, chat: str, messages: Sequence[ChatMessage]) -> None:
    """File each tool result of `messages` that escaping changes (one with a line break or a
    quote) as an attachment of the chat `chat`; one already filed is left as it is."""
    for position, message in enumerate(messages):
        if message.role != "tool":
            continue
        quoted = escaped(message.content)
        if quoted == message.content:
            continue  # the chat already holds it as a call would write it
        # As text: a tool's output cannot end a turn, whatever it spells.
        tokens = engine.target.tokenize(quoted, add_special=False, parse_special=False)
        engine.said.attachment((KEY, chat, position), tokens, order=time.time())


def forget_tool_results(engine: ChatEngine) -> None:
    """Drop every tool result filed (the bench starts each run without them)."""
    for key in engine.said.stored():
        if isinstance(key, tuple) and key and key[0] == KEY:
            engine.said.drop(key)
