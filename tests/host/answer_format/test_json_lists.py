"""Calls written as JSON between a family's tags (Apriel, MiniMax M1, Firefunction,
GigaChat, Apertus) and Seed-OSS's XML, read as llama.cpp reads them, malformed ones kept as
text, and streamed readings adding up to the whole answer's."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specchat.host.answer_format.formats import AnswerFormat, format_of
from specchat.host.answer_format.reader import AnswerReader, AnswerReply, read_answer
from tests.helpers.answer_pieces import TOOLS, gathered, in_pieces

#: Each family by a piece of its template's text that chooses it.
FAMILIES = {
    "apriel": format_of("<tool_calls>{{ tools }}</tool_calls>"),
    "functools": format_of("functools[{{ calls }}]"),
    "gigachat": format_of("<|role_sep|>{{ x }}<|message_sep|><|function_call|>"),
    "apertus": format_of("<|tools_prefix|>{{ calls }}<|tools_suffix|>"),
    "seed": format_of("<seed:tool_call>{{ calls }}</seed:tool_call><seed:think>"),
    "cohere": format_of("<|START_ACTION|>{{ calls }}<|START_RESPONSE|>"),
    "lfm2": format_of("<|tool_list_start|>{{ tools }}<|tool_list_end|>"),
}
WEATHER = '{"name": "get_weather", "arguments": {"location": "Paris"}}'
EDIT = '{"name": "edit", "arguments": {"filename": "a.c"}}'


def _read(family: str, text: str) -> AnswerReply:
    ids = (f"call_{n}" for n in itertools.count())
    return read_answer(FAMILIES[family], [text], tools=TOOLS, new_id=lambda: next(ids))[1]


def _calls(reply: AnswerReply) -> list[tuple[str, Any]]:
    return [(call.name, json.loads(call.arguments)) for call in reply.calls]


@pytest.mark.parametrize(
    ("family", "text"),
    [
        ("apriel", f"\n<tool_calls>[{WEATHER}, {EDIT}]</tool_calls>"),
        ("apriel", f"<tool_calls>\n{WEATHER}\n{EDIT}\n</tool_calls>"),  # MiniMax M1
        ("functools", f" functools[{WEATHER}, {EDIT}]"),
        ("gigachat", f"<|function_call|>{WEATHER}"),  # one call an answer
        ("gigachat", f"<|message_sep|>\n\nfunction call<|role_sep|>\n{WEATHER}"),  # GigaChat 3
        (
            "apertus",
            '<|tools_prefix|>[{"get_weather": {"location": "Paris"}}, '
            '{"edit": {"filename": "a.c"}}]<|tools_suffix|>',
        ),
    ],
)
def test_json_calls_are_read(family: str, text: str) -> None:
    reply = _read(family, text)
    assert not reply.content
    assert (
        _calls(reply)
        == [
            ("get_weather", {"location": "Paris"}),
            ("edit", {"filename": "a.c"}),
        ][: len(reply.calls)]
    )
    assert len(reply.calls) >= 1


def test_cohere_thinking_text_and_actions() -> None:
    text = (
        "<|START_THINKING|>Look it up.<|END_THINKING|><|START_ACTION|>[\n"
        '    {"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"location": "Paris"}}'
        "\n]<|END_ACTION|>"
    )
    reply = _read("cohere", text)
    assert reply.reasoning == "Look it up."
    assert _calls(reply) == [("get_weather", {"location": "Paris"})]
    assert _read("cohere", "<|START_RESPONSE|>Sunny.<|END_RESPONSE|>").content == "Sunny."


def test_lfm2_pythonic_calls() -> None:
    text = (
        "<|tool_call_start|>[get_weather(location='Paris'), "
        'edit(filename="a.c", n=3, flags={"x": [true, null]}, ok=True)]<|tool_call_end|>'
    )
    assert _calls(_read("lfm2", text)) == [
        ("get_weather", {"location": "Paris"}),
        ("edit", {"filename": "a.c", "n": 3, "flags": {"x": [True, None]}, "ok": True}),
    ]
    broken = "<|tool_call_start|>[edit(filename='a.c)]<|tool_call_end|>"
    assert _read("lfm2", broken).content == broken


def test_seed_oss_thinking_and_xml_calls() -> None:
    text = (
        "<seed:think>Look it up.</seed:think>\n<seed:tool_call>\n<function=get_weather>\n"
        "<parameter=location>Paris</parameter>\n</function>\n</seed:tool_call>"
    )
    reply = _read("seed", text)
    assert reply.reasoning == "Look it up."
    assert _calls(reply) == [("get_weather", {"location": "Paris"})]


@pytest.mark.parametrize(
    ("family", "text"),
    [
        ("apriel", "<tool_calls>[not json]</tool_calls>"),
        ("functools", "import functools[0] is no call"),
        ("apertus", '<|tools_prefix|>[{"a": 1, "b": 2}]<|tools_suffix|>'),
    ],
)
def test_a_malformed_call_is_kept_as_text(family: str, text: str) -> None:
    reply = _read(family, text)
    assert (reply.calls, reply.content) == ((), text)


ANSWERS = [
    ("apriel", f"Sure.\n<tool_calls>[{WEATHER}]</tool_calls>"),
    ("functools", f"Text functools[{EDIT}]"),
    ("gigachat", f"<|function_call|>{WEATHER}"),
    ("apertus", '<|tools_prefix|>[{"edit": {"filename": "<|tools"}}]<|tools_suffix|>'),
    (
        "seed",
        "<seed:think>a</seed:think> b<seed:tool_call><function=edit></function></seed:tool_call>",
    ),
]


@given(
    case=st.sampled_from(ANSWERS),
    cuts=st.lists(st.integers(min_value=0, max_value=300), max_size=10),
)
def test_a_streamed_reading_adds_up_to_the_whole_answers(
    case: tuple[str, str], cuts: list[int]
) -> None:
    family, answer = case
    whole = _read(family, answer)
    ids = (f"call_{n}" for n in itertools.count())
    fmt: AnswerFormat = FAMILIES[family]
    reader = AnswerReader(fmt, tools=TOOLS, new_id=lambda: next(ids))
    pieces = [p for part in in_pieces(answer, cuts) for p in reader.feed(part)]
    pieces += reader.finish()
    reasoning, content, calls = gathered(pieces)
    assert reader.reply() == whole
    assert (reasoning, content) == (whole.reasoning, whole.content or "")
    assert calls == [(c.id, c.name, c.arguments) for c in whole.calls]
