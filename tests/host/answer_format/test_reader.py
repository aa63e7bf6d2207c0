"""Answers read back in their family's format: Qwen's XML calls, Gemma 4's, thinking apart
(llama.cpp's own expectations, tests/test-chat.cpp), and a streamed reading that adds up to
the whole answer's however the text arrives."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specchat.host.answer_format.formats import (
    GEMMA4,
    GEMMA4_THOUGHT,
    QWEN_XML,
    THINK,
    THINK_TO_CALL,
    AnswerFormat,
    format_of,
)
from specchat.host.answer_format.formats import (
    QWEN_CODER as CODER_XML,
)
from specchat.host.answer_format.json_calls import HERMES
from specchat.host.answer_format.reader import (
    AnswerReader,
    AnswerReply,
    read_answer,
)
from specchat.host.answer_format.splitter import Arguments, CallOpened
from specchat.host.answer_format.thinking_space import analysed
from tests.helpers.answer_pieces import TOOLS, gathered, in_pieces

QWEN35 = AnswerFormat("qwen-xml", "Qwen XML", QWEN_XML, THINK_TO_CALL)
QWEN_CODER = AnswerFormat("qwen-xml", "Qwen3-Coder XML", CODER_XML, None)
GEMMA = AnswerFormat("gemma4", "Gemma 4", GEMMA4, GEMMA4_THOUGHT)
QWEN3 = AnswerFormat("hermes", "Hermes", HERMES, THINK)


def _ids() -> Iterator[str]:
    return (f"call_{n}" for n in itertools.count())


def _read(fmt: AnswerFormat, texts: list[str], *, opened: bool = False) -> AnswerReply:
    ids = _ids()
    return read_answer(fmt, texts, tools=TOOLS, thinking_open=opened, new_id=lambda: next(ids))[1]


def _calls(reply: AnswerReply) -> list[tuple[str, Any]]:
    return [(call.name, json.loads(call.arguments)) for call in reply.calls]


# --- Qwen3.5 and Qwen3-Coder: XML calls ----------------------------------------------------
def _xml(name: str, *parameters: tuple[str, str]) -> str:
    body = "".join(f"<parameter={key}>\n{value}\n</parameter>\n" for key, value in parameters)
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


def test_qwen35_thinking_opened_by_the_prompt_is_the_reasoning() -> None:
    reply = _read(QWEN35, ["I'm\nthinking\n</think>\n\nHello, world!\nWhat's up?"], opened=True)
    assert (reply.reasoning, reply.content, reply.calls) == (
        "I'm\nthinking\n",  # llama.cpp keeps the space before </think>
        "Hello, world!\nWhat's up?",
        (),
    )


def test_qwen35_calls_are_read_with_their_values_typed_by_the_schema() -> None:
    reply = _read(QWEN35, [_xml("special_function", ("arg1", "1"))])
    assert reply.content is None
    assert _calls(reply) == [("special_function", {"arg1": 1})]
    assert reply.calls[0].arguments == '{"arg1":1}'  # as llama.cpp writes it


def test_qwen35_thinking_then_a_call() -> None:
    text = "I'm\nthinking\n</think>\n\n" + _xml("special_function", ("arg1", "1"))
    reply = _read(QWEN35, [text], opened=True)
    assert reply.reasoning == "I'm\nthinking\n"
    assert _calls(reply) == [("special_function", {"arg1": 1})]


def test_qwen35_a_call_ends_the_thinking_the_prompt_opened() -> None:
    reply = _read(QWEN35, [_xml("get_weather", ("location", "Paris"))], opened=True)
    assert reply.reasoning == ""
    assert _calls(reply) == [("get_weather", {"location": "Paris"})]


def test_qwen35_parallel_calls() -> None:
    text = (
        _xml("special_function", ("arg1", "1"))
        + "\n"
        + _xml("special_function_with_opt", ("arg1", "1"), ("arg2", "2"))
    )
    assert _calls(_read(QWEN35, [text])) == [
        ("special_function", {"arg1": 1}),
        ("special_function_with_opt", {"arg1": 1, "arg2": 2}),
    ]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (
            'def hello():\n    print("Hello, world!")\n\nhello()',
            'def hello():\n    print("Hello, world!")\n\nhello()',
        ),
        ('    print("Hello, world!")', '    print("Hello, world!")'),
        ("#include\n", "#include\n"),  # a value's own last line break is kept
        ("1", "1"),  # a string parameter stays a string
    ],
)
def test_qwen_string_values_are_kept_as_written(value: str, expected: str) -> None:
    reply = _read(QWEN_CODER, [_xml("python", ("code", value))])
    assert _calls(reply) == [("python", {"code": expected})]


def test_qwen_values_of_several_types_are_json_where_they_read_as_one_allowed() -> None:
    reply = _read(QWEN_CODER, [_xml("mixed", ("value", "12"), ("items", "[1, 2]"))])
    assert _calls(reply) == [("mixed", {"value": 12, "items": [1, 2]})]
    reply = _read(QWEN_CODER, [_xml("mixed", ("value", "twelve"), ("items", "[1]"))])
    assert _calls(reply) == [("mixed", {"value": "twelve", "items": [1]})]


def test_a_qwen_call_whose_value_must_be_json_and_is_not_is_read_as_llama_cpp_reads_it() -> None:
    # llama.cpp's parser fails at the value: its lenient reading keeps the text before the
    # call, and nothing from the call on.
    text = "Hi\n" + _xml("mixed", ("value", "twelve"), ("items", "not a list")) + "\nafter"
    reply = _read(QWEN_CODER, [text])
    assert (reply.content, reply.calls) == ("Hi\n", ())


def test_qwen_edit_call() -> None:
    text = _xml("edit", ("filename", "foo.c"), ("oldString", "#iclunde"), ("newString", "#include"))
    assert _calls(_read(QWEN_CODER, [text])) == [
        ("edit", {"filename": "foo.c", "oldString": "#iclunde", "newString": "#include"})
    ]


@pytest.mark.parametrize(
    "text",
    [
        "<tool_call>\nno function here\n</tool_call>",
        "<tool_call>\n<function=unknown>\n<parameter=code>\nx\n</parameter>\nstray</tool_call>",
    ],
)
def test_a_malformed_xml_call_is_kept_as_text(text: str) -> None:
    reply = _read(QWEN_CODER, [text])
    assert reply.calls == ()
    assert reply.content == text


def test_qwen3_coder_calls_that_leave_out_tool_call_are_read_for_functions_offered() -> None:
    text = "<function=python>\n<parameter=code>\nx = 1\n</parameter>\n</function>\n</tool_call>"
    assert _calls(_read(QWEN_CODER, [text])) == [("python", {"code": "x = 1"})]
    unknown = text.replace("python", "unknown")
    assert _read(QWEN_CODER, [unknown]).content == unknown
    assert _read(QWEN35, [text]).content == text  # Qwen3.5 always writes <tool_call>


def test_a_call_of_a_function_offered_is_a_call_from_its_name_on() -> None:
    """Its name and its arguments stream as they come (as llama.cpp's do), so what follows
    its parameters cannot make it text again: it is left out."""
    text = "<tool_call>\n<function=python>\n<parameter=code>\nx\n</parameter>\nstray</tool_call>"
    reply = _read(QWEN_CODER, [text])
    assert ([(c.name, c.arguments) for c in reply.calls], reply.content) == (
        [("python", '{"code":"x"}')],
        None,
    )


def test_qwen_arguments_stream_as_they_come() -> None:
    ids = _ids()
    reader = AnswerReader(QWEN_CODER, tools=TOOLS, new_id=lambda: next(ids))
    said = [
        reader.feed(text)
        for text in (
            "<tool_call>\n<function=edit>\n<parameter=filename>\nfoo",
            ".c\n</param",
            "eter>\n<parameter=newString>\n#inc",
            "lude\n</parameter>\n</function>\n</tool_call>",
        )
    ]
    assert said == [
        [CallOpened(0, "call_0", "edit"), Arguments(0, '{"filename":"foo')],
        [Arguments(0, ".c")],
        [Arguments(0, '","newString":"#inc')],
        [Arguments(0, 'lude"}')],
    ]


def test_a_qwen_call_cut_short_is_sent_as_far_as_it_was_written() -> None:
    reply = _read(QWEN_CODER, ["<tool_call>\n<function=python>\n<parameter=code>\nprint("])
    assert [(c.name, c.arguments) for c in reply.calls] == [("python", '{"code":"print("}')]


# --- Gemma 4 --------------------------------------------------------------------------------
def test_gemma4_thought_and_content() -> None:
    reply = _read(GEMMA, ["<|channel>thought\nLet me see.<channel|>Hello!"])
    assert (reply.reasoning, reply.content) == ("Let me see.", "Hello!")


def test_gemma4_thought_blocks_anywhere_are_reasoning_and_a_lone_end_is_dropped() -> None:
    text = (
        "<|channel>thought\nFirst.<channel|>Hello <|channel>thought\n then.<channel|>"
        "there.<channel|>"
    )
    reply = _read(GEMMA, [text])
    assert (reply.reasoning, reply.content) == ("First.then.", "Hello there.")


def test_gemma4_calls_with_strings_numbers_and_nested_values() -> None:
    text = (
        'Sure.<|tool_call>call:edit{filename:<|"|>a, {b}: c<|"|>,n:3,'
        'o:{x:[1,true,null,-2.5e3]},s:<|"|><|"|>}<tool_call|>'
    )
    reply = _read(GEMMA, [text])
    assert reply.content == "Sure."
    assert _calls(reply) == [
        ("edit", {"filename": "a, {b}: c", "n": 3, "o": {"x": [1, True, None, -2500.0]}, "s": ""})
    ]
    assert reply.calls[0].arguments.startswith('{"filename":"a, {b}: c","n":3,')


def test_gemma4_several_calls() -> None:
    text = (
        '<|tool_call>call:get_weather{location:<|"|>Paris<|"|>}<tool_call|>'
        '<|tool_call>call:get_weather{location:<|"|>Oslo<|"|>}<tool_call|>'
    )
    assert _calls(_read(GEMMA, [text])) == [
        ("get_weather", {"location": "Paris"}),
        ("get_weather", {"location": "Oslo"}),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "<|tool_call>call:get_weather{location:Paris}<tool_call|>",  # a bare word
        "<|tool_call>get_weather{}<tool_call|>",  # no call:
    ],
)
def test_a_malformed_gemma4_call_is_read_as_llama_cpp_reads_it(text: str) -> None:
    # llama.cpp's parser fails at it: its lenient reading keeps only the text before it.
    reply = _read(GEMMA, ["Hi " + text + " and after"])
    assert (reply.content, reply.calls) == ("Hi ", ())


# --- thinking in the JSON formats ---------------------------------------------------------------
def test_a_thinking_block_the_model_opens_is_the_reasoning() -> None:
    reply = _read(
        QWEN3,
        [
            '<think>\nhmm\n</think>\n\n<tool_call>\n{"name": "python", "arguments": '
            '{"code": "1"}}\n</tool_call>'
        ],
    )
    assert reply.reasoning == "\nhmm\n"  # Qwen3's (llama.cpp's general reader) keeps space
    assert _calls(reply) == [("python", {"code": "1"})]


def test_an_answer_cut_short_inside_its_thinking_is_all_reasoning() -> None:
    reply = _read(QWEN3, ["<think>\nstill going"])
    assert (reply.reasoning, reply.content) == ("\nstill going", "")


def test_without_tools_a_call_is_content_and_the_thinking_still_apart() -> None:
    text = "<think>a</think>" + _xml("python", ("code", "1"))
    reply = read_answer(QWEN35, [text])[1]
    assert reply.reasoning == "a"
    assert reply.content == _xml("python", ("code", "1"))


def test_text_that_only_looks_like_thinking_is_content() -> None:
    reply = _read(QWEN3, ["<thinking is fun"])
    assert (reply.reasoning, reply.content) == ("", "<thinking is fun")


# --- the format from the template ------------------------------------------------------------
def test_the_format_is_chosen_from_the_template() -> None:
    def read_as(template: str) -> tuple[object, object]:
        chosen = format_of(template)
        return chosen.tools, chosen.thinking

    qwen35 = "<tool_call>\n<function=x>\n<parameter=y>\n<think>\n"
    # read as llama.cpp's generated parser reads it (the template writes no reasoning: bare
    # markers, the answer's leading white space skipped)
    assert read_as(qwen35) == (QWEN_XML, analysed(qwen35, THINK_TO_CALL))
    assert read_as("<tool_call>\n<function=x>\n<parameter=y>\n") == (CODER_XML, None)
    assert read_as("{{- '<|tool_call>call:' + name }}<|channel>thought") == (GEMMA4, GEMMA4_THOUGHT)
    hermes = "<tool_call>{{ tool_call | tojson }}</tool_call><think>"
    assert read_as(hermes) == (HERMES, analysed(hermes, THINK))
    assert read_as("<|im_start|>") == (HERMES, None)


def test_a_format_names_the_markers_the_engine_must_spell() -> None:
    qwen35 = format_of("<tool_call>\n<function=x>\n<parameter=y>\n<think>\n")
    assert qwen35.markers() == ("<tool_call>", "</tool_call>", "<think>", "</think>")
    gemma = format_of("{{- '<|tool_call>call:' + name }}")
    assert set(gemma.markers()) == {
        "<|tool_call>",
        "<tool_call|>",
        "<|channel>thought",
        "<channel|>",
        "<|tool_response>",
    }


def test_the_forced_start_of_a_required_call() -> None:
    assert QWEN_XML.prefix("python") == "<tool_call>\n<function=python>\n"
    assert QWEN_XML.prefix(None) == "<tool_call>\n<function="
    assert GEMMA4.prefix("get_weather") == "<|tool_call>call:get_weather{"


# --- streamed as the whole -------------------------------------------------------------------
ANSWERS = [
    (QWEN35, True, "I'm\nthinking\n</think>\n\nHello, world!\nWhat's up?"),
    (
        QWEN35,
        True,
        "Let me\n  check. \n</think>\n\n" + _xml("edit", ("filename", "a.c"), ("newString", "x\n")),
    ),
    (
        QWEN35,
        True,
        _xml("special_function", ("arg1", "1"))
        + "\n"
        + _xml("python", ("code", "if a < b:\n    pass")),
    ),
    (QWEN35, False, "<think>\n\n</think>\n\nplain </think> text <tool_call"),
    (QWEN_CODER, False, "Text first.\n" + _xml("python", ("code", "<parameter=x>"))),
    (QWEN_CODER, False, "<tool_call>\n<function=python>\n<parameter=code>\nprint("),
    (
        QWEN_CODER,
        False,
        "Sure.\n<function=python>\n<parameter=code>\n1\n</parameter>\n</tool_call>",
    ),
    (
        GEMMA,
        False,
        '<|channel>thought\nThinking <|"|> about it<channel|>Sure.'
        '<|tool_call>call:edit{filename:<|"|>a}<|"|>,n:[1,{k:2}]}<tool_call|>',
    ),
    (GEMMA, False, "<|channel>thought\nno end in sight"),
    (GEMMA, False, "<|channel>thought\nA.<channel|>B <|channel>thought C<channel|> D<channel|>"),
    (GEMMA, False, "<|tool_call>call:get_weather{location:Paris}<tool_call|> after"),
    (
        QWEN3,
        False,
        ' <think> a </think> b <tool_call>\n{"name": "python", "arguments": {"code": "1"}}'
        "\n</tool_call>",
    ),
]


@given(
    case=st.sampled_from(ANSWERS),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12),
)
def test_a_streamed_reading_adds_up_to_the_whole_answers(
    case: tuple[AnswerFormat, bool, str], cuts: list[int]
) -> None:
    fmt, opened, answer = case
    whole = _read(fmt, [answer], opened=opened)
    ids = _ids()
    reader = AnswerReader(fmt, tools=TOOLS, thinking_open=opened, new_id=lambda: next(ids))
    pieces = [p for part in in_pieces(answer, cuts) for p in reader.feed(part)]
    pieces += reader.finish()
    reasoning, content, calls = gathered(pieces)
    assert reader.reply() == whole
    assert reasoning == whole.reasoning
    assert content == (whole.content or "")
    assert calls == [(c.id, c.name, c.arguments) for c in whole.calls]


#: Fragments random answers are made of: every format's markup, values, space and words.
FRAGMENTS = [
    "<think>",
    "</think>",
    "</thi",
    "<tool_call>",
    "</tool_call>",
    "<function=python>",
    "<parameter=code>",
    "</parameter>",
    "</function>",
    "<|channel>thought",
    "<channel|>",
    "<|tool_call>",
    "call:get_weather{",
    "location:",
    '<|"|>',
    "}",
    "<tool_call|>",
    "\n",
    "  ",
    "word",
    "<",
    "1",
]


@given(
    fmt=st.sampled_from([QWEN35, QWEN_CODER, GEMMA, QWEN3]),
    opened=st.booleans(),
    parts=st.lists(st.sampled_from(FRAGMENTS), max_size=16),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
)
def test_any_answer_reads_alike_streamed(
    fmt: AnswerFormat, opened: bool, parts: list[str], cuts: list[int]
) -> None:
    answer = "".join(parts)
    whole = _read(fmt, [answer], opened=opened)
    ids = _ids()
    reader = AnswerReader(fmt, tools=TOOLS, thinking_open=opened, new_id=lambda: next(ids))
    pieces = [p for part in in_pieces(answer, cuts) for p in reader.feed(part)]
    pieces += reader.finish()
    reasoning, content, calls = gathered(pieces)
    assert (reasoning, content) == (whole.reasoning, whole.content or "")
    assert calls == [(c.id, c.name, c.arguments) for c in whole.calls]


# --- the generation prompt's thinking --------------------------------------------------------
def test_the_generation_prompts_thinking_is_read_as_the_answers_start() -> None:
    # Qwen3.5 opens it; SmolLM3 without thinking closes it; an earlier turn's is not the
    # generation prompt's.
    assert THINK.prompt_part("<|im_start|>assistant\n<think>\n") == "<think>\n"
    smol = "<|im_start|>assistant\n<think>\n\n</think>\n"
    assert THINK.prompt_part(smol) == "<think>\n\n</think>\n"
    earlier = "<think>\nold\n</think>\n\nHi<|im_end|>\n<|im_start|>assistant\n"
    assert THINK.prompt_part(earlier) == ""


def test_white_space_around_the_thinking_is_the_templates_own() -> None:
    # A template that writes `<think>\n` and `</think>\n\n` around reasoning: those pass
    # where the answer writes them, and no other white space is dropped.
    template = (
        "{% for m in messages %}{% if m.reasoning_content %}<think>\n{{ m.reasoning_content }}"
        "\n</think>\n\n{% endif %}{{ m.content }}{% endfor %}<tool_call>"
    )
    thinking = analysed(template, THINK)
    assert (thinking.start_space, thinking.end_space) == ("\n", "\n\n")
    fmt = AnswerFormat("hermes", "Hermes", HERMES, thinking)
    reply = read_answer(fmt, ["\n</think>\n\n\n Hi"], thinking_prompt="<think>\n")[1]
    assert (reply.reasoning, reply.content) == ("", "\n Hi")
    reply = read_answer(fmt, ["  <think>\n\n a\n</think>\nHi"])[1]
    assert (reply.reasoning, reply.content) == ("\n a\n", "Hi")
