"""What llama.cpp gives templates besides the chat, in SpecChat's rendering: its variables
and clock, its tool shape, lenient undefined values, and the chat adapted as it adapts it."""

from __future__ import annotations

from datetime import datetime

import pytest

from specchat.engine.templates.chat_template import (
    ChatMessage,
    ChatTemplateError,
    ToolCall,
    render_chat,
)
from specchat.engine.templates.gemma4_turns import fold_tool_responses
from specchat.engine.templates.llama_compat import tool_for_template
from specchat.engine.templates.ministral_blocks import as_blocks

NOW = datetime(2026, 1, 1, 9, 30)
CHAT = [ChatMessage("user", "Hi")]


def test_dates_and_thinking_are_llama_cpps_by_default() -> None:
    source = "{{ date_string }}|{{ datetime }}|{{ strftime_now('%Y-%m-%d %H:%M') }}|"
    source += "{{ enable_thinking }}"
    assert render_chat(source, CHAT, now=NOW) == "01 Jan 2026|Jan 01 2026|2026-01-01 09:30|True"


def test_a_requests_variables_replace_the_implicit_ones() -> None:
    source = "{{ enable_thinking }}|{{ date_string }}"
    extra = {"enable_thinking": False, "date_string": "today"}
    assert render_chat(source, CHAT, extra=extra, now=NOW) == "False|today"


def test_a_long_date_format_is_refused() -> None:
    with pytest.raises(ChatTemplateError):
        render_chat("{{ strftime_now('%Y' * 200) }}", CHAT, now=NOW)


def test_tools_reach_templates_in_llama_cpps_shape() -> None:
    tool = {
        "function": {"parameters": {"type": "object"}, "name": "f", "strict": True},
        "type": "function",
    }
    assert tool_for_template(tool) == {
        "type": "function",
        "function": {"name": "f", "description": "", "parameters": {"type": "object"}},
    }
    assert list(tool_for_template(tool)["function"]) == ["name", "description", "parameters"]


def test_undefined_values_chain_and_add_to_text_as_nothing() -> None:
    source = "{{ 'a' + missing + 'b' }}|{{ missing.deeper.still }}|{{ messages[0].none.x }}"
    assert render_chat(source, CHAT) == "ab||"


def test_calling_an_undefined_value_still_fails() -> None:
    with pytest.raises(ChatTemplateError):
        render_chat("{{ missing() }}", CHAT)


def test_a_template_that_adds_arguments_to_text_gets_the_text() -> None:
    source = "{% for m in messages %}{% for c in m.tool_calls or [] %}"
    source += "{{ c.function.name + ':' + c.function.arguments }}{% endfor %}{% endfor %}"
    call = ToolCall("call00001", "f", '{"a": 1}')
    chat = [*CHAT, ChatMessage("assistant", "", tool_calls=(call,))]
    assert render_chat(source, chat) == 'f:{"a": 1}'


def test_tool_results_fold_into_gemma4s_model_turn() -> None:
    call = {"type": "function", "function": {"name": "f", "arguments": {}}, "id": "c1"}
    messages = [
        {"role": "user", "content": "?"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": '{"t": 18}', "tool_call_id": "c1"},
        {"role": "tool", "content": "not json", "tool_call_id": "c2"},
        {"role": "assistant", "content": "18."},
    ]
    assert fold_tool_responses(messages) == [
        messages[0],
        {
            "role": "assistant",
            "tool_calls": [call],
            "tool_responses": [
                {"name": "f", "response": {"t": 18}},
                {"name": "c2", "response": "not json"},
            ],
            "content": "18.",
        },
    ]


def test_ministral_messages_become_blocks_thinking_first() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "?"},
        {"role": "assistant", "content": "4.", "reasoning_content": "2+2"},
    ]
    assert as_blocks(messages) == [
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
        messages[1],
        {
            "role": "assistant",
            "content": [{"type": "thinking", "thinking": "2+2"}, {"type": "text", "text": "4."}],
        },
    ]
