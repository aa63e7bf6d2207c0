"""One chat to answer, as the host takes it from the window or the API: its messages, its
controls, its tools; the chat's key, and its question for people."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specchat.engine.templates.chat_template import ChatMessage
from specchat.engine.types import Controls


@dataclass(frozen=True)
class ToolRequest:
    """The functions a request offers and how the answer may call them.

    Attributes:
        tools: the function definitions, in OpenAI's shape, as the client sent them (those
            `tool_choice`'s `allowed_tools` names, where it names some).
        choice: "auto" (the model decides), "required" (at least one call) or "function"
            (a call of `function`).
        function: the function `tool_choice` names, or "".
        parallel: the answer may make several calls (`parallel_tool_calls`, true unless
            sent false: the answer then ends after its first call).
    """

    tools: tuple[Mapping[str, Any], ...]
    choice: str = "auto"
    function: str = ""
    parallel: bool = True


@dataclass(frozen=True)
class ChatCall:
    """One chat-completions request, checked.

    Attributes:
        model: the model name the client asked for (answered with the loaded pair's).
        messages: the chat, roles normalised to system / user / assistant.
        max_tokens: the longest answer asked for, or None (the context's room).
        controls: mode, K and sampling (the mode from the `speculative` field, else auto).
        stop: the answer ends before any of these.
        stream: answer as server-sent events.
        include_usage: a streamed answer ends with a chunk carrying the usage.
        prediction: the text the answer is expected to mostly repeat, or None.
        tools: the functions the answer may call and how, or None (a plain text answer).
        template_kwargs: variables for the chat template (`chat_template_kwargs`, as
            llama-server takes them: enable_thinking and the like, and `reasoning_effort`),
            or None.
    """

    model: str
    messages: tuple[ChatMessage, ...]
    max_tokens: int | None
    controls: Controls
    stop: tuple[str, ...] = ()
    stream: bool = False
    include_usage: bool = False
    prediction: str | None = None
    tools: ToolRequest | None = None
    template_kwargs: Mapping[str, Any] | None = None

    @property
    def has_tool_history(self) -> bool:
        """Whether the chat holds tool calls or tool results (the template must write them)."""
        return any(m.tool_calls or m.role == "tool" for m in self.messages)


def latest_question(messages: Sequence[ChatMessage]) -> str:
    """What a request asks, for people: the last user message, or the tool results a chat
    ends with (an agent's next step answers those)."""
    results: list[str] = []
    for message in reversed(messages):
        if message.role != "tool":
            break
        results.append(f"[{message.name or 'tool'} result] {message.content}")
    if results:
        return "\n".join(reversed(results))
    return next((m.content for m in reversed(messages) if m.role == "user"), "")


def conversation_key(messages: Sequence[ChatMessage]) -> str:
    """The same chat across requests: its opening messages (system prompts, first question)
    name it, so a follow-up is "this chat" to the drafters and another chat is not."""
    digest = hashlib.sha256()
    for message in messages:
        digest.update(f"{message.role}\0{message.content}\0".encode())
        if message.role == "user":
            break
    return "api-" + digest.hexdigest()[:16]
