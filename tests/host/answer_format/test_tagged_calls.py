"""Calls between a family's own tags (DeepSeek, GLM, Kimi K2, MiniMax M2, Nemotron Nano 2)
read as llama.cpp's tests/test-chat.cpp expects, malformed ones kept as text, and streamed
readings adding up to the whole answer's."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specchat.host.answer_format.formats import (
    DEEPSEEK,
    DSML,
    GLM,
    KIMI,
    MINIMAX,
    NEMOTRON,
    THINK,
    AnswerFormat,
    format_of,
)
from specchat.host.answer_format.reader import AnswerReader, AnswerReply, read_answer
from tests.helpers.answer_pieces import TOOLS, gathered, in_pieces

FORMATS = {
    syntax.key: AnswerFormat(syntax.key, syntax.label, syntax, THINK)
    for syntax in (DEEPSEEK, DSML, GLM, KIMI, MINIMAX, NEMOTRON)
}
MORE_TOOLS = [
    *TOOLS,
    {"type": "function", "function": {"name": "get_time", "parameters": {}}},
    {"type": "function", "function": {"name": "empty_args", "parameters": {}}},
]


def _read(key: str, text: str, *, opened: bool = False) -> AnswerReply:
    ids = (f"call_{n}" for n in itertools.count())
    fmt = FORMATS[key]
    return read_answer(
        fmt, [text], tools=MORE_TOOLS, thinking_open=opened, new_id=lambda: next(ids)
    )[1]


def _calls(reply: AnswerReply) -> list[tuple[str, Any]]:
    return [(call.name, json.loads(call.arguments)) for call in reply.calls]


DS_BEGIN, DS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
DS_CALL, DS_SEP, DS_CALL_END = "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>"


def test_deepseek_v31_calls_after_reasoning_and_content() -> None:
    text = (
        f'REASONING</think>CONTENT{DS_BEGIN}{DS_CALL}get_time{DS_SEP}{{"city": "Paris"}}'
        f'{DS_CALL_END}{DS_CALL}get_weather{DS_SEP}{{"city": "Paris"}}{DS_CALL_END}{DS_END}'
    )
    reply = _read("deepseek", text, opened=True)
    assert (reply.reasoning, reply.content) == ("REASONING", "CONTENT")
    assert _calls(reply) == [("get_time", {"city": "Paris"}), ("get_weather", {"city": "Paris"})]


def test_deepseek_r1_calls_with_fenced_arguments() -> None:
    text = (
        f"{DS_BEGIN}{DS_CALL}function{DS_SEP}get_time\n```json\n"
        f'{{"city": "XYZCITY"}}\n```{DS_CALL_END}{DS_END}'
    )
    assert _calls(_read("deepseek", text)) == [("get_time", {"city": "XYZCITY"})]


def _dsml(name: str, *parameters: tuple[str, str, str]) -> str:
    written = "".join(
        f'<｜DSML｜parameter name="{key}" string="{kind}">{value}</｜DSML｜parameter>\n'
        for key, kind, value in parameters
    )
    return f'<｜DSML｜invoke name="{name}">\n{written}</｜DSML｜invoke>\n'


def test_deepseek_v4_dsml_calls_with_strings_and_json_values() -> None:
    text = (
        "</think>\n\n<｜DSML｜tool_calls>\n"
        + _dsml("get_weather", ("location", "true", "Paris"))
        + _dsml("mixed", ("value", "false", "12"), ("items", "false", '[1, "a"]'))
        + "</｜DSML｜tool_calls>"
    )
    reply = _read("dsml", text, opened=True)
    assert _calls(reply) == [
        ("get_weather", {"location": "Paris"}),
        ("mixed", {"value": 12, "items": [1, "a"]}),
    ]
    assert reply.calls[1].arguments == '{"value":12,"items":[1, "a"]}'


def test_glm_calls_with_values_typed_by_the_schema() -> None:
    text = (
        "<tool_call>special_function\n<arg_key>arg1</arg_key>\n<arg_value>1</arg_value>\n"
        "</tool_call>"
    )
    assert _calls(_read("glm", text)) == [("special_function", {"arg1": 1})]
    text = "<tool_call>edit<arg_key>filename</arg_key><arg_value>12</arg_value></tool_call>"
    assert _calls(_read("glm", text)) == [("edit", {"filename": "12"})]


def test_kimi_calls_name_their_function_in_their_id() -> None:
    text = (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.special_function:0"
        '<|tool_call_argument_begin|>{"arg1": 1}<|tool_call_end|><|tool_calls_section_end|>'
    )
    assert _calls(_read("kimi", text)) == [("special_function", {"arg1": 1})]


def test_minimax_calls_after_reasoning() -> None:
    text = (
        "Let's call a tool:\n</think>\n\n<minimax:tool_call>\n"
        '<invoke name="empty_args">\n</invoke>\n<invoke name="special_function">\n'
        '<parameter name="arg1">1</parameter>\n</invoke>\n</minimax:tool_call>'
    )
    reply = _read("minimax", text, opened=True)
    assert reply.reasoning == "Let's call a tool:\n"
    assert _calls(reply) == [("empty_args", {}), ("special_function", {"arg1": 1})]


M = "]<]minimax[>["
MINIMAX_M3 = format_of(f'{M}<tool_call><invoke name="')
M3_CALL = (
    f'{M}<tool_call>\n{M}<invoke name="mixed">{M}<value>12{M}</value>{M}<items>{M}<item>1'
    f"{M}</item>{M}<item>2{M}</item>{M}</items>{M}</invoke>\n{M}</tool_call>"
)


def test_minimax_m3_calls_typed_by_the_schema_and_its_thinking() -> None:
    ids = (f"call_{n}" for n in itertools.count())
    text = f"<mm:think>Hm.</mm:think>{M3_CALL}"
    reply = read_answer(MINIMAX_M3, [text], tools=MORE_TOOLS, new_id=lambda: next(ids))[1]
    assert reply.reasoning == "Hm."
    assert _calls(reply) == [("mixed", {"value": 12, "items": [1, 2]})]
    assert reply.calls[0].arguments == '{"value":12,"items":[1,2]}'
    text = "</mm:think>Sure."  # a turn without thinking opens with a lone end
    assert read_answer(MINIMAX_M3, [text], tools=MORE_TOOLS)[1].content == "Sure."


def test_nemotron_calls_are_a_json_list() -> None:
    text = (
        "I'm\nthinking\n</think>\n<TOOLCALL>"
        '[{"name": "special_function", "arguments": {"arg1": 1}}]</TOOLCALL>\n'
    )
    reply = _read("nemotron", text, opened=True)
    assert reply.reasoning == "I'm\nthinking\n"
    assert _calls(reply) == [("special_function", {"arg1": 1})]


@pytest.mark.parametrize(
    ("key", "text"),
    [
        ("deepseek", f"{DS_BEGIN}{DS_CALL}get_time no separator{DS_CALL_END}{DS_END}"),
        ("deepseek", f"{DS_BEGIN}{DS_CALL}get_time{DS_SEP}not json{DS_CALL_END}{DS_END}"),
        ("glm", "<tool_call>\n</tool_call>"),
        ("glm", "<tool_call>f<arg_key>k</arg_key>no value</tool_call>"),
        # a value its schema types as a number that is no JSON: the text, as llama.cpp keeps it
        (
            "glm",
            "<tool_call>special_function<arg_key>arg1</arg_key><arg_value>one</arg_value></tool_call>",
        ),
        ("kimi", "<|tool_calls_section_begin|>nothing<|tool_calls_section_end|>"),
        ("minimax", '<minimax:tool_call><invoke name="f">stray</invoke></minimax:tool_call>'),
        ("nemotron", "<TOOLCALL>[not json]</TOOLCALL>"),
        (
            "dsml",
            '<｜DSML｜tool_calls><｜DSML｜invoke name="f">x</｜DSML｜invoke></｜DSML｜tool_calls>',
        ),
    ],
)
def test_a_malformed_call_is_kept_as_text(key: str, text: str) -> None:
    reply = _read(key, text)
    assert reply.calls == ()
    assert reply.content == text


def test_the_tagged_formats_are_chosen_from_their_templates() -> None:
    assert format_of("<｜tool▁calls▁begin｜> <think>").tools == DEEPSEEK
    assert format_of("<tool_call>{{ name }}<arg_key>").tools == GLM
    assert format_of("<|tool_calls_section_begin|><|tool_call_begin|>").tools == KIMI
    assert format_of('<minimax:tool_call><invoke name="').tools == MINIMAX
    assert format_of("<TOOLCALL>").tools == NEMOTRON
    assert format_of("{% set dsml_token = '｜DSML｜' %}tool_calls").tools == DSML


ANSWERS = [
    (
        "deepseek",
        f'Think.</think>Text.{DS_BEGIN}{DS_CALL}get_time{DS_SEP}{{"city": "<P>"}}'
        f"{DS_CALL_END}{DS_END}",
    ),
    ("glm", "a</think><tool_call>edit\n<arg_key>filename</arg_key>\n<arg_value>x\n</arg_value>"),
    (
        "kimi",
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_time:3"
        '<|tool_call_argument_begin|>{"a": [1]}<|tool_call_end|><|tool_calls_section_end|>',
    ),
    (
        "minimax",
        '</think>\n<minimax:tool_call><invoke name="edit"><parameter name="filename">'
        "a</parameter></invoke></minimax:tool_call>",
    ),
    ("nemotron", '<TOOLCALL>[{"name": "get_time", "arguments": {}}]</TOOLCALL> after'),
    (
        "dsml",
        "a</think><｜DSML｜tool_calls>"
        + _dsml("edit", ("filename", "true", "x<y"))
        + "</｜DSML｜tool_calls>",
    ),
]


@given(
    case=st.sampled_from(ANSWERS),
    opened=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=300), max_size=10),
)
def test_a_streamed_reading_adds_up_to_the_whole_answers(
    case: tuple[str, str], opened: bool, cuts: list[int]
) -> None:
    key, answer = case
    whole = _read(key, answer, opened=opened)
    ids = (f"call_{n}" for n in itertools.count())
    reader = AnswerReader(
        FORMATS[key], tools=MORE_TOOLS, thinking_open=opened, new_id=lambda: next(ids)
    )
    pieces = [p for part in in_pieces(answer, cuts) for p in reader.feed(part)]
    pieces += reader.finish()
    reasoning, content, calls = gathered(pieces)
    assert reader.reply() == whole
    assert (reasoning, content) == (whole.reasoning, whole.content or "")
    assert calls == [(c.id, c.name, c.arguments) for c in whole.calls]
