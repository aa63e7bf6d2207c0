"""The self-test's check that a tool call and its thinking come back whole through each 2026
family's own chat template and SpecChat's reader of that family's answers."""

from __future__ import annotations

import json
from typing import Any

#: The families checked: (name, the publisher's template SpecChat ships).
FAMILIES = (("Qwen3.5", "Qwen3.5-4B.jinja"), ("Gemma 4", "google-gemma-4-31B-it.jinja"))

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"],
            },
        },
    }
]
ARGUMENTS = {"city": 'Paris "Centre"\nFrance', "days": 3}
THINKING = "The user wants the weather; I call the tool."


def round_trip(template_name: str) -> str:
    """Render a question, then the same chat answered with a call (and its thinking); what
    the answer adds is what the model writes. Read back, it must give the call and the
    thinking as they were. Returns a line for the report; raises AssertionError otherwise."""
    from specchat import paths
    from specchat.engine.templates.chat_template import ChatMessage, ChatTemplate, ToolCall
    from specchat.host.answer_format.formats import format_of
    from specchat.host.answer_format.reader import read_answer

    source = paths.chat_template_path(template_name).read_text(encoding="utf-8")
    template = ChatTemplate(source)
    variables = {"enable_thinking": True}
    asked = [ChatMessage("user", "What is the weather in Paris?")]
    prompt = template.render(asked, tools=TOOLS, extra=variables)
    call = ToolCall("call_1", "get_weather", json.dumps(ARGUMENTS))
    answered = [
        *asked,
        ChatMessage("assistant", "", tool_calls=(call,), reasoning_content=THINKING),
    ]
    whole = template.render(answered, add_generation_prompt=False, tools=TOOLS, extra=variables)
    assert whole.startswith(prompt), "the answered chat does not extend the question's prompt"
    written = whole[len(prompt) :]
    answer_format = format_of(source)
    thinking = answer_format.thinking
    # the generation prompt's open thinking is read as the answer's start, as llama.cpp does
    opening = "" if thinking is None else thinking.prompt_part(prompt)
    _, reply = read_answer(answer_format, [written], tools=TOOLS, thinking_prompt=opening)
    calls = [(c.name, json.loads(c.arguments)) for c in reply.calls]
    assert calls == [("get_weather", ARGUMENTS)], f"read back {calls} from {written!r}"
    if THINKING in written:
        assert reply.reasoning.strip() == THINKING, f"thinking read as {reply.reasoning!r}"
    return f"{answer_format.label}: call read back" + (
        ", thinking apart" if THINKING in written else ""
    )
