"""`specchat serve` with the 2026 families' tiny models (their real vocabularies and
publishers' templates: Qwen3.5, Gemma 4), through the `openai` client: a two-turn tool
conversation renders, the thinking the template opens comes back as `reasoning_content`
(whole and streamed alike, counted in `reasoning_tokens`), and `chat_template_kwargs` and
`reasoning_effort` reach the template."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from specchat.engine.llamacpp.prefix_cache import PrefixCache
from specchat.serve.server import ApiServer
from tests.conftest import RealChatModels
from tests.helpers.api_server import running_server

TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"location": {"type": "string"}},
                "required": ["location"],
            },
        },
    }
]
QUESTION: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]
CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'},
}
#: The second turn: the model's call (with its thinking) and the tool's result.
TOOL_TURN: list[Any] = [
    *QUESTION,
    {
        "role": "assistant",
        "content": "",
        "reasoning_content": "The user wants the weather; I call the tool.",
        "tool_calls": [CALL],
    },
    {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "Sunny, 21 C"},
]
ASK: dict[str, Any] = {"model": "x", "temperature": 0, "max_tokens": 12}


@pytest.fixture(scope="module")
def qwen35(real_chat_models: RealChatModels) -> Iterator[ApiServer]:
    """The tiny Qwen3.5 hybrid with its real vocabulary and template (and its MTP head)."""
    with running_server(real_chat_models.qwen35, None, n_ctx=4096, prefixes=PrefixCache()) as s:
        yield s


@pytest.fixture(scope="module")
def gemma4(real_chat_models: RealChatModels) -> Iterator[ApiServer]:
    """The tiny Gemma 4 with its real vocabulary and template."""
    with running_server(real_chat_models.gemma4, None, n_ctx=4096, prefixes=PrefixCache()) as s:
        yield s


def client(server: ApiServer) -> openai.OpenAI:
    assert server.address is not None
    return openai.OpenAI(base_url=server.address.base_url, api_key="unused", max_retries=0)


def _extra(answer: Any, name: str) -> Any:
    return (answer.model_extra or {}).get(name)


def test_qwen35_thinking_opened_by_the_template_comes_back_as_reasoning(
    qwen35: ApiServer,
) -> None:
    answer = client(qwen35).chat.completions.create(messages=QUESTION, tools=TOOLS, **ASK)
    message = answer.choices[0].message
    reasoning = _extra(message, "reasoning_content")
    # The tiny model's random text never closes `<think>`: all of it is thinking.
    assert reasoning and not message.content and not message.tool_calls
    assert answer.usage is not None and answer.usage.completion_tokens_details is not None
    assert answer.usage.completion_tokens_details.reasoning_tokens == answer.usage.completion_tokens

    stream = client(qwen35).chat.completions.create(
        messages=QUESTION, tools=TOOLS, stream=True, **ASK
    )
    streamed = {"reasoning_content": "", "content": ""}
    for chunk in stream:
        for choice in chunk.choices:
            for key in streamed:
                streamed[key] += _extra(choice.delta, key) or getattr(choice.delta, key, "") or ""
    assert streamed == {"reasoning_content": reasoning, "content": ""}


def test_qwen35_a_two_turn_tool_conversation_renders_with_its_thinking(qwen35: ApiServer) -> None:
    api = client(qwen35)
    first = api.chat.completions.create(messages=QUESTION, tools=TOOLS, **ASK)
    second = api.chat.completions.create(messages=TOOL_TURN, tools=TOOLS, **ASK)
    assert second.usage is not None and first.usage is not None
    assert second.usage.prompt_tokens > first.usage.prompt_tokens
    # The call's thinking is written (Qwen3.5 keeps it for turns after the last question).
    without = [dict(m) for m in TOOL_TURN]
    del without[1]["reasoning_content"]
    bare = api.chat.completions.create(messages=without, tools=TOOLS, **ASK)
    assert bare.usage is not None
    assert second.usage.prompt_tokens > bare.usage.prompt_tokens
    assert _extra(second.choices[0].message, "reasoning_content")


@pytest.mark.parametrize(
    "switch",
    [
        {"extra_body": {"chat_template_kwargs": {"enable_thinking": False}}},
        {"reasoning_effort": "none"},
    ],
)
def test_qwen35_thinking_turned_off_reaches_the_template(
    qwen35: ApiServer, switch: dict[str, Any]
) -> None:
    api = client(qwen35)
    thinking = api.chat.completions.create(messages=QUESTION, **ASK)
    plain = api.chat.completions.create(messages=QUESTION, **ASK, **switch)
    assert plain.usage is not None and thinking.usage is not None
    # `<think>\n\n</think>\n\n` closed in the prompt: the answer is content.
    assert plain.usage.prompt_tokens > thinking.usage.prompt_tokens
    assert plain.choices[0].message.content
    assert not _extra(plain.choices[0].message, "reasoning_content")
    assert plain.usage.completion_tokens_details is not None
    assert plain.usage.completion_tokens_details.reasoning_tokens == 0


def test_a_template_kwarg_of_the_wrong_type_is_refused(qwen35: ApiServer) -> None:
    with pytest.raises(openai.BadRequestError, match="enable_thinking"):
        client(qwen35).chat.completions.create(
            messages=QUESTION, extra_body={"chat_template_kwargs": {"enable_thinking": "no"}}, **ASK
        )


def test_gemma4_a_two_turn_tool_conversation_renders(gemma4: ApiServer) -> None:
    api = client(gemma4)
    first = api.chat.completions.create(messages=QUESTION, tools=TOOLS, **ASK)
    second = api.chat.completions.create(messages=TOOL_TURN, tools=TOOLS, **ASK)
    assert first.usage is not None and second.usage is not None
    assert second.usage.prompt_tokens > first.usage.prompt_tokens
    # Gemma 4's template closes an empty thought unless thinking is on: the answer is text.
    message = first.choices[0].message
    assert message.content and not _extra(message, "reasoning_content")
    # streamed, the second turn's answer adds up to the whole one (T = 0)
    streamed = {"reasoning_content": "", "content": ""}
    for chunk in api.chat.completions.create(messages=TOOL_TURN, tools=TOOLS, stream=True, **ASK):
        for choice in chunk.choices:
            for key in streamed:
                streamed[key] += _extra(choice.delta, key) or getattr(choice.delta, key, "") or ""
    answer = second.choices[0].message
    assert streamed == {
        "reasoning_content": _extra(answer, "reasoning_content") or "",
        "content": answer.content or "",
    }
    assert streamed["content"] or streamed["reasoning_content"]


def test_qwen35_a_named_call_is_read_in_its_xml_whole_and_streamed(qwen35: ApiServer) -> None:
    """The call's opening up to its name is forced; whatever the tiny model writes after
    it, the answer is a call of that function, its arguments a JSON object."""
    api = client(qwen35)
    choice: Any = {"type": "function", "function": {"name": "get_weather"}}
    answer = api.chat.completions.create(messages=QUESTION, tools=TOOLS, tool_choice=choice, **ASK)
    calls = answer.choices[0].message.tool_calls
    assert calls and [c.function.name for c in calls] == ["get_weather"]
    assert answer.choices[0].finish_reason in ("tool_calls", "length")
    arguments = calls[0].function.arguments
    assert isinstance(json.loads(arguments), dict)

    streamed: dict[int, list[str]] = {}
    names: dict[int, str] = {}
    for chunk in api.chat.completions.create(
        messages=QUESTION, tools=TOOLS, tool_choice=choice, stream=True, **ASK
    ):
        for delta_call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            if delta_call.function and delta_call.function.name:
                names[delta_call.index] = delta_call.function.name
            if delta_call.function and delta_call.function.arguments:
                streamed.setdefault(delta_call.index, []).append(delta_call.function.arguments)
    assert names == {0: "get_weather"}
    assert "".join(streamed.get(0, [])) == arguments


def _call_turn(api: openai.OpenAI, *, stream: bool) -> dict[str, Any]:
    """The first turn, the call forced by name: the call as the client hands it back."""
    choice: Any = {"type": "function", "function": {"name": "get_weather"}}
    if not stream:
        answer = api.chat.completions.create(
            messages=QUESTION, tools=TOOLS, tool_choice=choice, **ASK
        )
        (call,) = answer.choices[0].message.tool_calls or []
        return {"id": call.id, "name": call.function.name, "arguments": call.function.arguments}
    whole: dict[str, Any] = {"id": "", "name": "", "arguments": ""}
    for chunk in api.chat.completions.create(
        messages=QUESTION, tools=TOOLS, tool_choice=choice, stream=True, **ASK
    ):
        for part in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            assert part.index == 0
            whole["id"] += part.id or ""
            if part.function:
                whole["name"] += part.function.name or ""
                whole["arguments"] += part.function.arguments or ""
    return whole


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_call_its_result_and_the_answer_after_it(qwen35: ApiServer, stream: bool) -> None:
    """Call, result, answer, as an agent runs them: the model's own call handed back with
    the tool's result, and the model answers after it. (Qwen's XML call is a call from its
    forced name on; a random-weight Gemma 4 never writes the `<tool_call|>` that closes its
    call, so its history call is the client's, in test_gemma4_a_two_turn_tool_conversation.)
    """
    api = client(qwen35)
    call = _call_turn(api, stream=stream)
    assert call["name"] == "get_weather" and call["id"]
    assert isinstance(json.loads(call["arguments"]), dict)
    returned = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": call["arguments"]},
            }
        ],
    }
    result = {"role": "tool", "tool_call_id": call["id"], "content": "Sunny, 21 C"}
    answer = api.chat.completions.create(messages=[*QUESTION, returned, result], tools=TOOLS, **ASK)
    message = answer.choices[0].message
    assert answer.choices[0].finish_reason in ("stop", "length", "tool_calls")
    assert message.content or _extra(message, "reasoning_content") or message.tool_calls
