"""Values are written as text as llama.cpp's Jinja writes them: printed, `|string` and `~`."""

from __future__ import annotations

import pytest

from specchat.engine.templates.chat_template import ChatMessage
from specchat.engine.templates.guards import ChatTemplateError, ChatTemplateProblem, RenderLimits
from specchat.engine.templates.llama_text import as_text, printed
from specchat.engine.templates.sandbox import SandboxTemplate

CHAT = [ChatMessage("user", "Hi")]


def _render(source: str) -> str:
    return SandboxTemplate(source).render(CHAT)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # gather_string_parts_recursive: a mapping and none write nothing, a list its items
        ("{{ {'a': 1} }}", ""),
        ("{{ none }}", ""),
        ("{{ [1, 'b', [2.5, true], {'x': 1}, none] }}", "1b2.5True"),
        ("{{ messages[0] }}", ""),
        ("{{ 0.1 }} {{ 2.0 }} {{ 7 }} {{ false }}", "0.1 2.0 7 False"),
        ("{{ messages | map(attribute='role') }}", "user"),
    ],
)
def test_printing_writes_what_llama_cpp_writes(source: str, expected: str) -> None:
    assert _render(source) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # value_to_string_repr: single quotes, or llama.cpp's JSON string where the text
        # holds one (Python's repr writes 'it\'s "x"' instead)
        ({"a": "it's", "b": 'say "hi"'}, "{'a': \"it's\", 'b': 'say \"hi\"'}"),
        (['it\'s "x"\n'], '["it\'s \\"x\\"\\n"]'),
        (["a\nb\\"], "['a\nb\\']"),  # no quote: written as it is, nothing escaped
        (["it's\x01"], '["it\'s\\u0001"]'),
        ([1, 0.5, 1e-7, True, None], "[1, 0.5, 0.0, True, None]"),
        ((1,), "(1,)"),
        ((1, "a"), "(1, 'a')"),
        ({"k": [{"n": []}]}, "{'k': [{'n': []}]}"),
        (None, "None"),
        (3.0, "3.0"),
    ],
)
def test_as_text_is_llama_cpps_as_string(value: object, expected: str) -> None:
    assert as_text(value) == expected


def test_string_filter_and_tilde_write_llama_cpps_text() -> None:
    source = "{{ {'d': \"it's \\\"x\\\"\"} | string }}|{{ 'a' ~ none ~ [1, 'x'] ~ 2.50 }}"
    assert _render(source) == "{'d': \"it's \\\"x\\\"\"}|a[1, 'x']2.5"


def test_printed_and_as_text_leave_text_as_it_is() -> None:
    assert printed("it's") == "it's"
    assert as_text("it's") == "it's"


@pytest.mark.parametrize("write", ["{{ x | string }}", "{{ '' ~ x }}", "{{ x ~ '' }}"])
def test_writing_is_bounded_while_it_is_built(write: str) -> None:
    # Under the size bound checked first, over the limit once quoted: refused as it grows.
    source = "{% set x = [\"'\" ~ ('\\x01' * 300)] * 20 %}" + write
    limits = RenderLimits(max_chars=20_000)
    with pytest.raises(ChatTemplateError) as caught:
        SandboxTemplate(source, limits=limits).render(CHAT)
    assert caught.value.problem is ChatTemplateProblem.LIMIT


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("{{ range(3) }}|{{ '' ~ range(2) }}", "012|[0, 1]"),
        ("{% set d = {'a': 1} %}{{ d.keys() }}|{{ d.items() | string }}", "a|[('a', 1)]"),
        (
            '{% set ns = namespace(n=1, s="it\'s") %}{{ ns }}|{{ ns | string }}',
            "|{'n': 1, 's': \"it's\"}",
        ),
    ],
)
def test_ranges_views_and_namespaces_are_llama_cpps_arrays_and_objects(
    source: str, expected: str
) -> None:
    assert _render(source) == expected
