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

    @property
    def has_object_arguments(self) -> bool:
        """Whether the arguments are a JSON object (or nothing): a cut or malformed call's
        are not, and a template that walks them as a mapping cannot write them."""
        if not self.arguments.strip():
            return True
        try:
            return isinstance(json.loads(self.arguments), dict)
        except ValueError:
            return False

    def for_template(self, *, as_object: bool = True) -> dict[str, Any]:
        """The call in OpenAI's shape, its arguments an object where they parse as one:
        templates write them with `tojson` (transformers' convention), which would quote a
        JSON text a second time; otherwise as written (RawJson). `as_object=False`: as
        written whatever they hold, for a template that adds them to text (llama.cpp gives
        such a template the text)."""
        arguments: Any = RawJson(self.arguments) if self.arguments.strip() else {}
        try:
            parsed = json.loads(self.arguments)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            arguments = parsed
        if not as_object:
            arguments = self.arguments
        # llama.cpp's order (common_chat_msg::to_json_oaicompat), for templates that write a
        # call whole: its id last, and only where it has one
        call: dict[str, Any] = {
            "type": "function",
            "function": {"name": self.name, "arguments": arguments},
        }
        if self.id:
            call["id"] = self.id
        return call


@dataclass(frozen=True)
class ChatMessage:
    """One message of a conversation as the template sees it.

    Attributes:
        role: "system", "user", "assistant" or "tool".
        content: the text.
        tool_calls: the functions an assistant message called.
        tool_call_id: for a tool's result, the call it answers ("" for none).
        name: for a tool's result, the function that gave it ("" for none).
        reasoning_content: an assistant message's thinking, apart from its content ("" for
            none); templates that keep or drop earlier thinking read it.
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
        yield self.reasoning_content
        for call in self.tool_calls:
            yield call.name
            yield call.arguments
        yield self.tool_call_id
        yield self.name


def as_mapping(
    message: ChatMessage | Mapping[str, Any], *, object_arguments: bool = True
) -> dict[str, Any]:
    """A message as the template sees it: a plain dict with its role and content, and the
    other fields only where it has them (a template may test for their presence), in
    llama.cpp's order (common_chat_msg::to_json_oaicompat). `object_arguments`: calls'
    arguments as mappings (ToolCall.for_template)."""
    if not isinstance(message, ChatMessage):
        return dict(message)
    mapping: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.reasoning_content:
        mapping["reasoning_content"] = message.reasoning_content
    if message.name:
        mapping["name"] = message.name
    if message.tool_call_id:
        mapping["tool_call_id"] = message.tool_call_id
    if message.tool_calls:
        mapping["tool_calls"] = [
            call.for_template(as_object=object_arguments) for call in message.tool_calls
        ]
    return mapping
