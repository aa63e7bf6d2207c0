"""A chat that holds tool calls, read as `specchat serve` reads it, reaches templates with
each call's arguments as a mapping: the templates that walk them (Qwen3.5, Qwen3-Coder,
Gemma 4) write each argument, and a call an earlier answer cut short is named."""

from __future__ import annotations

import copy

import pytest

from specchat.engine.templates.chat_template import ChatTemplate, ChatTemplateError
from tests.helpers.chat_oracle import FIXTURES, as_served, conversation, load_json


def _template(stem: str) -> ChatTemplate:
    return ChatTemplate(load_json(FIXTURES / "render" / f"{stem}.json")["source"])


@pytest.mark.parametrize(
    ("stem", "written"),
    [
        ("Qwen3.5-4B", "<function=get_weather>\n<parameter=city>\nParis\n</parameter>"),
        ("Qwen3-Coder", "<function=get_weather>\n<parameter=city>\nParis\n</parameter>"),
        ("google-gemma-4-31B-it", 'call:get_weather{city:<|"|>Paris<|"|>'),
    ],
)
def test_call_arguments_reach_the_template_as_a_mapping(stem: str, written: str) -> None:
    messages, tools = as_served(conversation("tool_result"))
    assert written in _template(stem).render(messages, tools=tools)


@pytest.mark.parametrize("stem", ["Qwen3.5-4B", "Qwen3-Coder"])
def test_a_call_cut_short_is_named(stem: str) -> None:
    chat = copy.deepcopy(conversation("tool_result"))
    chat["messages"][1]["tool_calls"][0]["function"]["arguments"] = '{"city": "Par'
    messages, tools = as_served(chat)
    with pytest.raises(ChatTemplateError) as caught:
        _template(stem).render(messages, tools=tools)
    assert "the call to 'get_weather' are not one" in str(caught.value)
    assert '{"city": "Par' in str(caught.value)
