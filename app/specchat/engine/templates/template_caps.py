"""What a template takes of a chat, probed as llama.cpp probes it (common/jinja/caps.cpp),
and the chat adapted to it as llama.cpp adapts it before rendering."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from specchat.engine.templates.guards import ChatTemplateError, ChatTemplateProblem

#: Texts no real chat holds: the probes look for them in what a template wrote.
PROBE_SYSTEM = "specchat_probe_system"
PROBE_ARGUMENT = "specchat_probe_argument"
PROBE_VALUE = "specchat_probe_value"
#: Nine letters and digits: Mistral's templates refuse any other call id.
PROBE_CALL_ID = "probe0001"

#: Renders mappings with the template: (messages, tools) -> text; raises when it refuses.
Render = Callable[[list[dict[str, Any]], list[dict[str, Any]] | None], str]


@dataclass(frozen=True)
class TemplateCaps:
    """What a chat template takes.

    Attributes:
        system_role: it writes a system message (Gemma 2 refuses one: llama.cpp then
            puts the system text before the first user message's).
        object_arguments: it takes a call's arguments as a mapping (Qwen3.5 and Gemma 4
            walk their items); otherwise they stay the JSON text the model wrote
            (functionary v3.2 adds them to text).
    """

    system_role: bool = True
    object_arguments: bool = True


def probe_system_role(render: Render) -> bool:
    """Whether the template writes a system message (it neither refuses nor drops one)."""
    messages = [
        {"role": "system", "content": PROBE_SYSTEM},
        {"role": "user", "content": "?"},
    ]
    try:
        return PROBE_SYSTEM in render(messages, None)
    except ChatTemplateError as error:
        _raise_if_runaway(error)
        return False  # a template that refuses a system message takes none


def probe_object_arguments(render: Render, tools: list[dict[str, Any]]) -> bool:
    """Whether the template takes a call's arguments as a mapping: it renders a call whose
    arguments are one, writes their value, and does not print the mapping as Python."""
    call: dict[str, Any] = {
        "type": "function",
        "function": {"name": "specchat_probe_call", "arguments": {PROBE_ARGUMENT: PROBE_VALUE}},
        "id": PROBE_CALL_ID,
    }
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "?"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": "4", "tool_call_id": PROBE_CALL_ID},
        {"role": "assistant", "content": "4."},
        {"role": "user", "content": "?"},
    ]
    try:
        text = render(messages, tools)
    except ChatTemplateError as error:
        _raise_if_runaway(error)
        return False  # one that refuses a mapping is given the text
    return PROBE_VALUE in text and f"'{PROBE_ARGUMENT}'" not in text


def _raise_if_runaway(error: ChatTemplateError) -> None:
    # A template past its limits on a two-line probe is past them on any chat: refused
    # now, not waited for a second time.
    if error.problem is ChatTemplateProblem.LIMIT:
        raise error


def adapt(messages: Sequence[dict[str, Any]], caps: TemplateCaps) -> list[dict[str, Any]]:
    """`messages` as llama.cpp hands them to a template with `caps`: a first system message
    the template cannot write joined to the next message's text with a newline (or dropped
    when alone), as common_chat_templates_apply does."""
    adapted = [dict(m) for m in messages]
    if caps.system_role or not adapted or adapted[0].get("role") != "system":
        return adapted
    system = adapted.pop(0)
    if adapted:
        adapted[0]["content"] = f"{system.get('content', '')}\n{adapted[0].get('content', '')}"
    return adapted
