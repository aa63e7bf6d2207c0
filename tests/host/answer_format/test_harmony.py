"""Answers written as a run of messages, read as llama.cpp reads them: gpt-oss's harmony
(analysis as reasoning, final as content, a message to a function as a call), Functionary
3.2's recipients and Kimi K3's sections, streamed readings adding up to the whole."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from specchat.host.answer_format.formats import format_of
from specchat.host.answer_format.harmony import MARKERS
from specchat.host.answer_format.reader import AnswerReader, AnswerReply, read_answer
from tests.helpers.answer_pieces import TOOLS, gathered, in_pieces

HARMONY = format_of("{{- '<|start|>assistant<|channel|>final<|message|>' }}")


def _read(text: str, *, tools: Sequence[Mapping[str, Any]] | None = TOOLS) -> AnswerReply:
    ids = (f"call_{n}" for n in itertools.count())
    return read_answer(HARMONY, [text], tools=tools, new_id=lambda: next(ids))[1]


def test_the_format_and_its_spelled_markers() -> None:
    assert HARMONY.messages is not None and HARMONY.spelled == MARKERS
    assert HARMONY.tools.prefix("get_weather") == (
        " to=functions.get_weather<|channel|>commentary json<|message|>"
    )


FUNCTIONARY = format_of("{{ '>>>all' }}{{ '>>>${recipient}' }}")


def test_functionary_recipients_are_content_and_calls() -> None:
    ids = (f"call_{n}" for n in itertools.count())
    text = 'all\nLet me look.>>>get_weather\n{"location": "Paris"}'
    reply = read_answer(FUNCTIONARY, [text], tools=TOOLS, new_id=lambda: next(ids))[1]
    assert reply.content == "Let me look."
    assert [(c.name, json.loads(c.arguments)) for c in reply.calls] == [
        ("get_weather", {"location": "Paris"})
    ]
    assert FUNCTIONARY.tools.prefix("get_weather") == "get_weather\n"


def test_analysis_is_reasoning_and_final_is_content() -> None:
    text = (
        "<|channel|>analysis<|message|>The user asks.\n<|end|>"
        "<|start|>assistant<|channel|>final<|message|>It is sunny."
    )
    reply = _read(text)
    assert (reply.reasoning, reply.content, reply.calls) == ("The user asks.\n", "It is sunny.", ())


def test_a_message_to_a_function_is_a_call_with_its_body_as_arguments() -> None:
    text = (
        "<|channel|>analysis<|message|>Look it up.<|end|><|start|>assistant"
        " to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>"
        '{"location": "Paris"}<|call|>'
    )
    reply = _read(text)
    assert reply.reasoning == "Look it up." and reply.content is None
    assert [(c.name, json.loads(c.arguments)) for c in reply.calls] == [
        ("get_weather", {"location": "Paris"})
    ]


def test_without_tools_a_message_to_a_function_is_content() -> None:
    text = ' to=functions.get_weather<|channel|>commentary json<|message|>{"a": 1}'
    assert _read(text, tools=None).content == '{"a": 1}'


def test_a_malformed_call_keeps_its_arguments_as_written() -> None:
    text = ' to=functions.get_weather<|channel|>commentary json<|message|>{"location": "Pa'
    reply = _read(text)
    assert [(c.name, c.arguments, bool(c.problem)) for c in reply.calls] == [
        ("get_weather", '{"location": "Pa', True)
    ]


ANSWERS = [
    "<|channel|>analysis<|message|>a <|end|><|start|>assistant<|channel|>final<|message|>b <|x",
    "<|channel|>analysis<|message|>one<|end|><|start|>assistant to=functions.edit"
    '<|channel|>commentary json<|message|>{"filename": "<|end"}<|call|>',
    "<|channel|>final<|message|>c<|end|><|start|>assistant<|channel|>analysis<|message|>d",
    "<|channel|>analys",
]


@given(
    answer=st.sampled_from(ANSWERS),
    functionary=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=300), max_size=10),
)
def test_a_streamed_reading_adds_up_to_the_whole_answers(
    answer: str, functionary: bool, cuts: list[int]
) -> None:
    fmt = FUNCTIONARY if functionary else HARMONY
    if functionary:
        answer = answer.replace("<|channel|>analysis<|message|>", "all\n").replace("<|end|>", ">>>")
    ids = (f"call_{n}" for n in itertools.count())
    whole = read_answer(fmt, [answer], tools=TOOLS, new_id=lambda: next(ids))[1]
    ids = (f"call_{n}" for n in itertools.count())
    reader = AnswerReader(fmt, tools=TOOLS, new_id=lambda: next(ids))
    pieces = [p for part in in_pieces(answer, cuts) for p in reader.feed(part)]
    pieces += reader.finish()
    reasoning, content, calls = gathered(pieces)
    assert reader.reply() == whole
    assert (reasoning, content) == (whole.reasoning, whole.content or "")
    assert calls == [(c.id, c.name, c.arguments) for c in whole.calls]


KIMI_K3 = format_of("<|open|>{{ x }}<|close|><|end_of_msg|>")
K3_CALL = (
    '<|open|>call tool="edit" index="1"<|sep|><|open|>argument key="filename" type="string"'
    '<|sep|>a.c<|close|>argument<|sep|><|open|>argument key="n" type="integer"<|sep|>3'
    "<|close|>argument<|sep|><|close|>call<|sep|>"
)


def test_kimi_k3_sections() -> None:
    text = (
        "Look.<|close|>think<|sep|><|open|>response<|sep|>Sure.<|close|>response<|sep|>"
        f"<|open|>tools<|sep|>{K3_CALL}<|close|>tools"
    )
    ids = (f"call_{n}" for n in itertools.count())
    reply = read_answer(KIMI_K3, [text], tools=TOOLS, new_id=lambda: next(ids))[1]
    assert (reply.reasoning, reply.content) == ("Look.", "Sure.")
    assert [(c.name, json.loads(c.arguments)) for c in reply.calls] == [
        ("edit", {"filename": "a.c", "n": 3})
    ]
    assert KIMI_K3.spelled == ("<|open|>", "<|close|>", "<|sep|>")


@given(
    cut_short=st.integers(min_value=0, max_value=len(K3_CALL)),
    cuts=st.lists(st.integers(min_value=0, max_value=300), max_size=10),
)
def test_kimi_k3_streamed_as_whole(cut_short: int, cuts: list[int]) -> None:
    answer = f"a<|close|>think<|sep|><|open|>tools<|sep|>{K3_CALL}{K3_CALL}"[: 40 + cut_short * 2]
    ids = (f"call_{n}" for n in itertools.count())
    whole = read_answer(KIMI_K3, [answer], tools=TOOLS, new_id=lambda: next(ids))[1]
    ids = (f"call_{n}" for n in itertools.count())
    reader = AnswerReader(KIMI_K3, tools=TOOLS, new_id=lambda: next(ids))
    pieces = [p for part in in_pieces(answer, cuts) for p in reader.feed(part)]
    pieces += reader.finish()
    reasoning, content, calls = gathered(pieces)
    assert (reasoning, content) == (whole.reasoning, whole.content or "")
    assert calls == [(c.id, c.name, c.arguments) for c in whole.calls]
