"""Tool calls read from a model's text: each family's syntax, and the streamed split equal to
the whole answer's however the text arrives."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specchat.host.answer_format.json_calls import (
    HERMES,
    LLAMA3,
    MISTRAL,
    MISTRAL_ARGS,
    ToolSyntax,
    syntax_of,
)
from specchat.host.answer_format.splitter import (
    Arguments,
    CallOpened,
    CallSplitter,
    Content,
    Piece,
    split_answer,
)
from tests.helpers.answer_pieces import gathered
from tests.helpers.chat_templates import QWEN25_TEMPLATE

HERMES_ANSWERS = [
    '<tool_call>\n{"name": "get_time", "arguments": {"tz": "UTC"}}\n</tool_call>',
    'Let me look.\n<tool_call>\n{"name": "read", "arguments": {"text": "a } b"}}\n'
    '</tool_call>\n<tool_call>\n{"name": "list", "arguments": {}}\n</tool_call>',
    "An answer that speaks of <tool and < signs but calls nothing.\n",
    '<tool_call>\n{"arguments": {"x": 1}, "name": "reversed_keys"}\n</tool_call>',
    '<tool_call>\n{"name": "cut_short", "arguments": {"x": 1, "y": "ab',
    "<tool_call>\nno JSON here\n</tool_call> and after",
    '<tool_call>{"name":"tight","arguments":{"a":[1,2]}}</tool_call>',
    '<tool_call>\n{"name": "no_outer_brace", "arguments": {"a": 1}</tool_call>',
    '```json\n{\n  "name": "get_time",\n  "arguments": {\n    "tz": "UTC"\n  }\n}\n```',
    'Some JSON:\n```json\n{"name": "Ada", "age": 36}\n```\nand ```python\nx = 1\n```',
    '{"name": "get_time", "arguments": {}}',
    '{"name": "Ada"} is a JSON object.',
    '<tool_call>\n{"name": "run_check", "arguments": {}}\n'
    '{"name": "finish", "arguments": {"summary": "x"}}',
    '<tool_call>\n{"name": "read", "arguments": {"path": "a"}}\n'
    '{"name": "list", "arguments": {}}}\n</tool_call>\nDone.',
]
#: The functions the answers above may call: a fenced block or a bare object with a name but
#: no arguments is a call only where it names one of them.
OFFERED = ("get_time", "read", "list", "reversed_keys", "cut_short", "tight", "no_outer_brace")
OFFERED += ("run_check", "finish")


def _gathered(pieces: list[Piece]) -> tuple[str, list[tuple[str, str, str]]]:
    """The content, and each call's (id, name, arguments) as a client puts them together."""
    _, content, calls = gathered(pieces)
    return content, calls


def _in_pieces(text: str, cuts: list[int]) -> list[str]:
    edges = [0, *sorted(c % (len(text) + 1) for c in cuts), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(edges)]


@given(
    answer=st.sampled_from(HERMES_ANSWERS),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12),
)
def test_a_streamed_split_is_the_whole_answers_split_however_it_arrives(
    answer: str, cuts: list[int]
) -> None:
    whole_pieces, whole = split_answer(HERMES, [answer], names=OFFERED)
    splitter = CallSplitter(HERMES, names=OFFERED)
    pieces = [p for part in _in_pieces(answer, cuts) for p in splitter.feed(part)]
    pieces += splitter.finish()
    content, calls = _gathered(pieces)
    assert splitter.reply().content == whole.content
    assert content == (whole.content or "")
    assert [(name, args) for _, name, args in calls] == [
        (call.name, call.arguments) for call in whole.calls
    ]
    assert [ident for ident, _, _ in calls] == [c.id for c in splitter.reply().calls]
    if whole.calls:  # no markup of a call leaks into the content
        assert "<tool_call" not in content and "</tool_call" not in content
        assert "```json" not in content
    assert _gathered(whole_pieces)[0] == content


#: Fragments that random answers are made of: markup, JSON, white space, words.
FRAGMENTS = [
    "<tool_call>",
    "</tool_call>",
    "<tool",
    "```json",
    "```",
    '{"name": "get_time", "arguments": ',
    '{"name": "Ada"',
    "{",
    "}",
    '"x": 1',
    "\n",
    "  ",
    "word",
    "<",
]


@given(
    parts=st.lists(st.sampled_from(FRAGMENTS), max_size=14),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=8),
)
def test_any_answer_splits_alike_streamed_and_an_answer_without_calls_is_kept_whole(
    parts: list[str], cuts: list[int]
) -> None:
    answer = "".join(parts)
    _, whole = split_answer(HERMES, [answer], names=OFFERED)
    splitter = CallSplitter(HERMES, names=OFFERED)
    pieces = [p for part in _in_pieces(answer, cuts) for p in splitter.feed(part)]
    pieces += splitter.finish()
    content, calls = _gathered(pieces)
    assert content == (whole.content or "")
    assert [(n, a) for _, n, a in calls] == [(c.name, c.arguments) for c in whole.calls]
    if not whole.calls:
        assert whole.content == answer


def test_hermes_calls_are_read_with_their_arguments_as_written() -> None:
    reply = split_answer(HERMES, [HERMES_ANSWERS[1]])[1]
    assert reply.content == "Let me look.\n"  # white space before a call: llama.cpp's content
    assert [(c.name, c.arguments, c.problem) for c in reply.calls] == [
        ("read", '{"text": "a } b"}', ""),
        ("list", "{}", ""),
    ]
    assert reply.calls[0].id != reply.calls[1].id
    assert all(c.id.startswith("call_") for c in reply.calls)


def test_an_answer_without_calls_is_its_text_unchanged() -> None:
    text = "  Two lines,\nthe second ends in white space.  \n"
    pieces, reply = split_answer(HERMES, [text])
    assert reply.content == text and not reply.calls
    assert "".join(p.text for p in pieces if isinstance(p, Content)) == text


@pytest.mark.parametrize(
    ("answer", "name", "arguments"),
    [
        ('<tool_call>\n{"name": "cut", "arguments": {"x": 1, "y": "ab', "cut", '{"x": 1, "y": "ab'),
        (
            '<tool_call>{"name": "s", "arguments": "{\\"a\\": 1}"}</tool_call>',
            "s",
            '"{\\"a\\": 1}"',
        ),
    ],
)
def test_arguments_that_are_no_json_object_are_kept_as_written_and_flagged(
    answer: str, name: str, arguments: str
) -> None:
    (call,) = split_answer(HERMES, [answer])[1].calls
    assert (call.name, call.arguments) == (name, arguments)
    assert call.problem


@pytest.mark.parametrize("answer", [HERMES_ANSWERS[8], HERMES_ANSWERS[10]])
def test_a_fenced_or_bare_object_with_a_name_and_arguments_is_a_call(answer: str) -> None:
    """Whether its function is offered or not: the client's agent answers an unknown one."""
    for names in (OFFERED, ("other",)):
        (call,) = split_answer(HERMES, [answer], names=names)[1].calls
        assert call.name == "get_time" and not call.problem


def test_an_object_with_a_name_alone_is_a_call_only_to_a_function_offered() -> None:
    answer = '```json\n{"name": "get_time"}\n```'
    (call,) = split_answer(HERMES, [answer], names=OFFERED)[1].calls
    assert (call.name, call.arguments) == ("get_time", "{}")
    for text in (answer, HERMES_ANSWERS[9], HERMES_ANSWERS[11]):
        reply = split_answer(HERMES, [text], names=("other",))[1]
        assert reply.calls == () and reply.content == text


def test_a_call_naming_no_function_stays_the_models_text() -> None:
    reply = split_answer(HERMES, [HERMES_ANSWERS[5]])[1]
    assert reply.calls == ()
    assert reply.content == HERMES_ANSWERS[5]


def test_a_call_whose_keys_come_in_another_order_is_read_once_closed() -> None:
    splitter = CallSplitter(HERMES)
    assert splitter.feed('<tool_call>\n{"arguments": {"x": 1}, ') == []
    pieces = splitter.feed('"name": "rev"}\n</tool_call>')
    assert [type(p) for p in pieces] == [CallOpened, Arguments]
    assert splitter.reply().calls[0].arguments == '{"x": 1}'


def test_a_call_streams_its_name_first_then_its_arguments_as_they_come() -> None:
    splitter = CallSplitter(HERMES, new_id=lambda: "call_1")
    assert splitter.feed("<tool_") == []  # may open a call: held
    assert splitter.feed('call>\n{"name": "write", "arguments": ') == []
    assert splitter.feed('{"text": "one') == [
        CallOpened(0, "call_1", "write"),
        Arguments(0, '{"text": "one'),
    ]
    assert splitter.feed(' two"}') == [Arguments(0, ' two"}')]  # whole: the call is read
    assert splitter.reply().calls[0].arguments == '{"text": "one two"}'
    assert splitter.feed("}\n</tool_call>") == []
    assert splitter.finish() == []


@pytest.mark.parametrize(
    ("syntax", "answer", "expected"),
    [
        (LLAMA3, '{"name": "f", "parameters": {"a": 1}}', [("f", '{"a": 1}')]),
        (LLAMA3, '<|python_tag|>{"name": "f", "parameters": {}}', [("f", "{}")]),
        (LLAMA3, '{"not": "a call"}', []),
        (LLAMA3, 'Text first {"name": "f", "parameters": {}}', []),
        (
            MISTRAL,
            '[TOOL_CALLS][{"name": "f", "arguments": {"a": 1}}, {"name": "g", "arguments": {}}]',
            [("f", '{"a": 1}'), ("g", "{}")],
        ),
        (
            MISTRAL_ARGS,
            '[TOOL_CALLS]f[ARGS]{"a": 1}[TOOL_CALLS]g[ARGS]{}',
            [("f", '{"a": 1}'), ("g", "{}")],
        ),
    ],
)
def test_each_family_syntax_is_read(
    syntax: ToolSyntax, answer: str, expected: list[tuple[str, str]]
) -> None:
    reply = split_answer(syntax, [answer])[1]
    assert [(c.name, c.arguments) for c in reply.calls] == expected
    assert reply.content == (None if expected else answer)


def test_the_syntax_comes_from_the_template() -> None:
    assert syntax_of(QWEN25_TEMPLATE) is HERMES
    assert syntax_of("{{ '<|start_header_id|>' }}{{ '<|python_tag|>' }}") is LLAMA3
    assert syntax_of("[AVAILABLE_TOOLS] [TOOL_CALLS]") is MISTRAL
    assert syntax_of("[TOOL_CALLS] [ARGS]") is MISTRAL_ARGS


@pytest.mark.parametrize("syntax", [HERMES, LLAMA3, MISTRAL, MISTRAL_ARGS])
def test_a_named_functions_forced_start_reads_as_that_call(syntax: ToolSyntax) -> None:
    """Whatever the model writes after the forced start, the call is the function named."""
    prefix = syntax.prefix("get_time")
    ending = ' {"tz": "UTC"}}' + ("]" if syntax is MISTRAL else "") + syntax.openings[0].closing
    if syntax is MISTRAL_ARGS:
        ending = '{"tz": "UTC"}'
    (call,) = split_answer(syntax, [prefix, ending])[1].calls
    assert call.name == "get_time"
    assert json.loads(call.arguments) == {"tz": "UTC"}
    assert not prefix.endswith(" ")  # the model writes its arguments' first token itself


@pytest.mark.parametrize("answer", HERMES_ANSWERS[12:14])
def test_calls_written_in_a_row_in_one_block_are_each_read(answer: str) -> None:
    """Qwen2.5-Coder 1.5B made to call writes a second call after the first, unclosed."""
    reply = split_answer(HERMES, [answer], names=OFFERED)[1]
    assert len(reply.calls) == 2 and not any(c.problem for c in reply.calls)
    assert reply.content == ("Done." if answer.endswith("Done.") else None)


def test_a_call_copying_its_templates_doubled_braces_keeps_its_arguments() -> None:
    """Qwen2.5-Coder's template shows the format as `{{"name": ...}}`; the 1.5B model copies
    it at times."""
    answer = '{{"name": "get_time", "arguments": {"timezone": "Asia/Tokyo"}}}'
    (call,) = split_answer(HERMES, [answer], names=OFFERED)[1].calls
    assert (call.name, call.arguments, call.problem) == (
        "get_time",
        '{"timezone": "Asia/Tokyo"}',
        "",
    )
