"""Function calling on the real default pair through the `openai` client: a tool call comes
back, its result goes in, the final answer comes out, whole and streamed; at T = 0 the
answers are the plain decoder's whatever the drafting."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from specchat.bench.agent.agent_tasks import SYSTEM as SYSTEM_AGENT
from specchat.bench.agent.agent_tasks import TOOLS as AGENT_TOOLS
from specchat.serve.server import ApiServer
from tests.helpers.api_server import running_server

pytestmark = [pytest.mark.real_model, pytest.mark.slow]

#: An agent's usual system prompt: without one, the 1.5B model calls the tool again after
#: its result instead of answering.
SYSTEM = (
    "You are a helpful assistant. Call a tool when you need it; once you have its result, "
    "answer the user in one sentence."
)
GET_TIME: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "The current time in a time zone.",
        "parameters": {
            "type": "object",
            "properties": {
                "timezone": {"type": "string", "description": "IANA time zone, e.g. Europe/Paris"}
            },
            "required": ["timezone"],
        },
    },
}
ASK: list[Any] = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": "What time is it in Tokyo right now?"},
]
RESULT = '{"timezone": "Asia/Tokyo", "time": "14:05"}'


@pytest.fixture(scope="module")
def real_server(real_pair: tuple[Path, Path]) -> Iterator[ApiServer]:
    with running_server(*real_pair, n_ctx=2048) as server:
        yield server


def _client(server: ApiServer) -> openai.OpenAI:
    assert server.address is not None
    return openai.OpenAI(base_url=server.address.base_url, api_key="none", max_retries=0)


def _ask(api: openai.OpenAI, messages: list[Any], **extra: Any) -> Any:
    asked: dict[str, Any] = {"tools": [GET_TIME], "temperature": 0, "max_tokens": 64, **extra}
    return api.chat.completions.create(model="any", messages=messages, timeout=600, **asked)


def _checked_call(name: str, arguments: str) -> None:
    assert name == "get_time"
    assert "Tokyo" in json.loads(arguments)["timezone"]


def test_a_tool_round_trip_whole(real_server: ApiServer) -> None:
    api = _client(real_server)
    first = _ask(api, ASK)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls or []
    _checked_call(call.function.name, call.function.arguments)
    assert (first.model_extra or {})["specchat"]["invalid_tool_arguments"] == []
    result = {"role": "tool", "tool_call_id": call.id, "content": RESULT}
    final = _ask(api, [*ASK, choice.message.model_dump(exclude_none=True), result])
    answer = final.choices[0]
    assert answer.finish_reason == "stop" and not answer.message.tool_calls
    assert "14:05" in (answer.message.content or "")


def test_a_tool_round_trip_streamed(real_server: ApiServer) -> None:
    api = _client(real_server)
    deltas = [c.choices[0].delta for c in _ask(api, ASK, stream=True) if c.choices]
    parts = [part for d in deltas for part in d.tool_calls or []]
    first, *rest = parts
    assert first.id and first.function is not None and first.function.name
    assert all(p.id is None and p.function is not None and not p.function.name for p in rest)
    arguments = "".join((p.function.arguments or "") for p in parts if p.function)
    _checked_call(first.function.name, arguments)
    assert not "".join(d.content or "" for d in deltas)  # no markup leaked as text
    called = {
        "role": "assistant",
        "tool_calls": [
            {
                "id": first.id,
                "type": "function",
                "function": {"name": first.function.name, "arguments": arguments},
            }
        ],
    }
    result = {"role": "tool", "tool_call_id": first.id, "content": RESULT}
    chunks = list(_ask(api, [*ASK, called, result], stream=True))
    text = "".join((c.choices[0].delta.content or "") for c in chunks if c.choices)
    assert "14:05" in text
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"


def _said(reply: Any) -> tuple[Any, ...]:
    message = reply.choices[0].message
    calls = [(c.function.name, c.function.arguments) for c in message.tool_calls or []]
    return message.content, calls, reply.choices[0].finish_reason, reply.usage.completion_tokens


def test_tool_answers_at_t0_are_the_plain_decoders_with_drafting_on_or_off(
    real_server: ApiServer,
) -> None:
    api = _client(real_server)
    called = _ask(api, ASK, extra_body={"speculative": {"mode": "plain"}})
    (call,) = called.choices[0].message.tool_calls or []
    result = {"role": "tool", "tool_call_id": call.id, "content": RESULT}
    chats = [ASK, [*ASK, called.choices[0].message.model_dump(exclude_none=True), result]]
    for chat in chats:
        plain = _said(_ask(api, chat, extra_body={"speculative": {"mode": "plain"}}))
        for mode in ("auto", "draft", "lookup"):
            drafted = _ask(api, chat, extra_body={"speculative": {"mode": mode}})
            assert _said(drafted) == plain, mode
            extra = drafted.model_extra or {}
            assert extra["specchat"]["mode"] == mode
            if mode == "draft":  # drafting was on: the draft model proposed every round
                assert extra["timings"]["draft_n"] > 0


def test_parallel_tool_calls_false_ends_the_answer_after_its_first_call(
    real_server: ApiServer,
) -> None:
    """Made to call (required), the 1.5B model writes several calls in a row; with
    `parallel_tool_calls` false the first one is the answer, and decoding stopped there."""
    api = _client(real_server)
    agent = [
        {"role": "system", "content": SYSTEM_AGENT},
        {"role": "user", "content": "The check fails. Find the bug in calc.py and fix it."},
    ]
    asked = {"tools": [*AGENT_TOOLS], "tool_choice": "required"}
    several = _ask(api, agent, **asked)
    one = _ask(api, agent, **asked, parallel_tool_calls=False)
    calls = several.choices[0].message.tool_calls or []
    (first,) = one.choices[0].message.tool_calls or []
    assert len(calls) > 1
    assert (first.function.name, first.function.arguments) == (
        calls[0].function.name,
        calls[0].function.arguments,
    )
    assert one.choices[0].finish_reason == "tool_calls"
    assert one.usage.completion_tokens < several.usage.completion_tokens
