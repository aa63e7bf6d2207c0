"""Chat templates: compiled and rendered in the bounded sandbox, inside the template host."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from specchat.engine.templates.chat_message import ChatMessage, ToolCall, as_mapping
from specchat.engine.templates.gemma4_turns import fold_tool_responses, needs_folding
from specchat.engine.templates.guards import (
    PREFIX,
    ChatTemplateError,
    ChatTemplateProblem,
    RenderLimits,
    shorten,
)
from specchat.engine.templates.host import TemplateHost, TemplateSpec, shared_host
from specchat.engine.templates.ministral_blocks import as_blocks, needs_blocks
from specchat.engine.templates.sandbox import FALLBACK_TEMPLATE, SandboxTemplate, template_source
from specchat.engine.templates.template_caps import (
    PROBE_CALL_ID,
    TemplateCaps,
    adapt,
    probe_object_arguments,
    probe_system_role,
)

__all__ = [
    "FALLBACK_TEMPLATE",
    "ChatMessage",
    "ChatTemplate",
    "ChatTemplateError",
    "ChatTemplateProblem",
    "RenderLimits",
    "SandboxTemplate",
    "ToolCall",
    "ToolSupport",
    "render_chat",
]

#: Function names no real chat holds: the probes look for them in what a template wrote.
PROBE_TOOL = "specchat_probe_tool"
PROBE_CALL = "specchat_probe_call"


@dataclass(frozen=True)
class ToolSupport:
    """What of OpenAI's function calling a chat template writes into the prompt.

    Attributes:
        tools: it writes the functions a request offers (`tools`).
        calls: it writes an assistant message's tool calls.
    """

    tools: bool
    calls: bool


def probe_tool(name: str) -> dict[str, Any]:
    """A function definition in OpenAI's shape, for probing a template."""
    parameters = {"type": "object", "properties": {}}
    return {
        "type": "function",
        "function": {"name": name, "description": "A probe.", "parameters": parameters},
    }


class ChatTemplate:
    """A model's chat template, compiled and rendered in the template host process.

    The sandbox refuses what a template spells out before any of it runs, and bounds what it
    builds; the host process adds a hard time and memory limit that holds even inside one
    long call, which stops a runaway template without touching the caller's thread.

    Attributes:
        source: the Jinja source in use (the fallback when the model has none).
        is_fallback: whether the model had no usable template of its own.
        bos_token, eos_token: passed to the template, as transformers does.
        limits: the bounds of each rendering.
    """

    def __init__(
        self,
        source: str | None,
        *,
        bos_token: str = "",
        eos_token: str = "",
        limits: RenderLimits = RenderLimits(),
        host: TemplateHost | None = None,
    ) -> None:
        self.source, self.is_fallback = template_source(source)
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.limits = limits
        self._host = host or shared_host()
        self._spec = TemplateSpec(self.source, bos_token, eos_token, limits)
        self._host.compile(self._spec)
        self._tool_support: ToolSupport | None = None
        # llama.cpp rewrites the chat for these two families (see their modules)
        self._fold_tool_responses = needs_folding(self.source)
        self._thinking_blocks = needs_blocks(self.source)
        self._system_role: bool | None = None
        self._object_arguments: bool | None = None

    def render(
        self,
        messages: Iterable[ChatMessage | Mapping[str, Any]],
        *,
        add_generation_prompt: bool = True,
        tools: Sequence[Mapping[str, Any]] | None = None,
        extra: Mapping[str, Any] | None = None,
        now: datetime | None = None,
    ) -> str:
        """The prompt text for `messages`; raises ChatTemplateError with a readable message.

        `extra`: the request's own template variables (chat_template_kwargs, enable_thinking);
        `now`: the moment the template's dates read (the local time when not given)."""
        chat = list(messages)
        caps = self._caps_for(chat)
        mapped = [as_mapping(m, object_arguments=caps.object_arguments) for m in chat]
        mappings = adapt(mapped, caps)
        if self._fold_tool_responses:
            mappings = fold_tool_responses(mappings)
        if self._thinking_blocks:
            mappings = as_blocks(mappings)
        try:
            return self._render(
                mappings,
                tools=None if tools is None else [dict(t) for t in tools],
                add_generation_prompt=add_generation_prompt,
                extra=extra,
                now=now,
            )
        except ChatTemplateError as error:
            raise _named_bad_call(error, chat) from None

    def _render(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None,
        add_generation_prompt: bool = True,
        extra: Mapping[str, Any] | None = None,
        now: datetime | None = None,
    ) -> str:
        return self._host.render(
            self._spec,
            messages=messages,
            add_generation_prompt=add_generation_prompt,
            tools=tools,
            extra=None if extra is None else dict(extra),
            now=now,
        )

    def _caps_for(self, chat: list[ChatMessage | Mapping[str, Any]]) -> TemplateCaps:
        """What the template takes, probed once each where `chat` needs it: a system
        message, or a call's arguments."""

        def render(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
            return self._render(messages, tools=tools)

        first = as_mapping(chat[0]) if chat else {}
        if self._system_role is None and first.get("role") == "system":
            self._system_role = probe_system_role(render)
        has_calls = any(as_mapping(m).get("tool_calls") for m in chat)
        if self._object_arguments is None and has_calls:
            self._object_arguments = probe_object_arguments(render, [probe_tool(PROBE_TOOL)])
        return TemplateCaps(
            system_role=self._system_role is not False,
            object_arguments=self._object_arguments is not False,
        )

    def tool_support(self) -> ToolSupport:
        """Whether the template writes tools and tool calls, found by rendering a probe of
        each once: a template that ignores them would leave the model answering blind."""
        if self._tool_support is None:
            tools = [probe_tool(PROBE_TOOL)]
            asked = [ChatMessage("user", "?")]
            call = ToolCall(PROBE_CALL_ID, PROBE_CALL, "{}")
            called = [
                *asked,
                ChatMessage("assistant", "", tool_calls=(call,)),
                ChatMessage("tool", "4", tool_call_id=call.id, name=PROBE_CALL),
            ]
            self._tool_support = ToolSupport(
                tools=PROBE_TOOL in self._probe(asked, tools),
                calls=PROBE_CALL in self._probe(called, tools),
            )
        return self._tool_support

    def _probe(self, messages: list[ChatMessage], tools: list[dict[str, Any]]) -> str:
        try:
            return self.render(messages, tools=tools)
        except ChatTemplateError:  # a template that refuses the probe cannot take tools
            return ""


def _named_bad_call(
    error: ChatTemplateError, chat: Sequence[ChatMessage | Mapping[str, Any]]
) -> ChatTemplateError:
    """`error`, or where the chat holds a call whose arguments are no JSON object and the
    template failed, what to do about that call: Qwen3.5 and Qwen3-Coder walk arguments as
    a mapping and fail with "Can only get item pairs from a mapping" on a call an earlier
    answer cut short (llama.cpp refuses such a chat as well)."""
    if error.problem is not ChatTemplateProblem.FAILED:
        return error
    for message in chat:
        if not isinstance(message, ChatMessage):
            continue
        for call in message.tool_calls:
            if not call.has_object_arguments:
                return ChatTemplateError(
                    ChatTemplateProblem.FAILED,
                    f"{PREFIX} takes a tool call's arguments as a JSON object, but the "
                    f"arguments of the call to {call.name!r} are not one "
                    f"({shorten(call.arguments)!r}: an answer cut short, or a malformed "
                    "call); send them as a JSON object",
                )
    return error


def render_chat(
    template: str | None,
    messages: Iterable[ChatMessage | Mapping[str, Any]],
    *,
    bos_token: str = "",
    eos_token: str = "",
    add_generation_prompt: bool = True,
    tools: Sequence[Mapping[str, Any]] | None = None,
    extra: Mapping[str, Any] | None = None,
    now: datetime | None = None,
    limits: RenderLimits = RenderLimits(),
) -> str:
    """Compile `template` (None: the fallback) and render `messages` with it, in one call."""
    compiled = ChatTemplate(template, bos_token=bos_token, eos_token=eos_token, limits=limits)
    return compiled.render(
        messages, add_generation_prompt=add_generation_prompt, tools=tools, extra=extra, now=now
    )
