"""A chat's messages as the chat template sees them, tool calls and tool results included."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any


class RawJson(str):
    """Text a template's `tojson` writes as it is: a call's arguments that are no JSON
    object, so the chat shows what the model wrote, not that text quoted as a JSON string
    (which a model copies, quoting once more at every turn)."""

    __slots__ = ()


@dataclass(frozen=True)
class ToolCall:
    """A function call an assistant message made.

    Attributes:
        id: the call's id, which the tool's result names.
        name: the function called.
        arguments: its arguments as JSON text, as the model wrote them.
    """

    id: str
    name: str
    arguments: str

    def for_template(self) -> dict[str, Any]:
        """The call in OpenAI's shape, its arguments an object where they parse as one:
        templates write them with `tojson` (transformers' convention), which would quote a
        JSON text a second time; otherwise as written (RawJson)."""
        arguments: Any = RawJson(self.arguments) if self.arguments.strip() else {}
        try:
            parsed = json.loads(self.arguments)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            arguments = parsed
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": arguments},
        }


@dataclass(frozen=True)
class ChatMessage:
    """One message of a conversation as the template sees it.

    Attributes:
        role: "system", "user", "assistant" or "tool".
        content: the text.
        tool_calls: the functions an assistant message called.
        tool_call_id: for a tool's result, the call it answers ("" for none).
        name: for a tool's result, the function that gave it ("" for none).
        reasoning_content: an assistant message's thinking, for templates that write it
            ("" for none; Qwen3.5's drops it from turns before the last question itself).
    """

    role: str
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""
    name: str = ""
    reasoning_content: str = ""

    def texts(self) -> Iterator[str]:
        """Every text the message holds, its content first."""
        yield self.content
        for call in self.tool_calls:
            yield call.name
            yield call.arguments
        yield self.tool_call_id
        yield self.name
        yield self.reasoning_content


def as_mapping(message: ChatMessage | Mapping[str, Any]) -> dict[str, Any]:
    """A message as the template sees it: a plain dict with its role and content, and the
    tool fields only where it has them (a template may test for their presence)."""
    if not isinstance(message, ChatMessage):
        return dict(message)
    mapping: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        mapping["tool_calls"] = [call.for_template() for call in message.tool_calls]
    if message.tool_call_id:
        mapping["tool_call_id"] = message.tool_call_id
    if message.name:
        mapping["name"] = message.name
    if message.reasoning_content:
        mapping["reasoning_content"] = message.reasoning_content
    return mapping
