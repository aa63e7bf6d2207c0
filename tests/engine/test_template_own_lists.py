"""A template may append to and pop from the lists it builds; what it is given stays immutable."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from specchat.engine.templates.chat_template import ChatMessage
from specchat.engine.templates.guards import ChatTemplateError, ChatTemplateProblem, RenderLimits
from specchat.engine.templates.sandbox import SandboxTemplate

CHAT = [ChatMessage("system", "Be brief."), ChatMessage("user", "Hi")]
TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def _render(source: str, *, limits: RenderLimits = RenderLimits(), tools: Any = None) -> str:
    return SandboxTemplate(source, limits=limits).render(CHAT, tools=tools)


def _refusal(source: str, **kwargs: Any) -> ChatTemplateError:
    with pytest.raises(ChatTemplateError) as caught:
        _render(source, **kwargs)
    return caught.value


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # a literal, appended to and popped from (Kimi K2 queues its call ids so)
        (
            "{% set xs = [] %}{% set _ = xs.append('a') %}{% set _ = xs.append('b') %}"
            "{{ xs | join(',') }}",
            "a,b",
        ),
        (
            "{% set q = namespace(ids=[]) %}{% set _ = q.ids.append('x') %}"
            "{% set _ = q.ids.append('y') %}{{ q.ids.pop(0) }}{{ q.ids | length }}",
            "x1",
        ),
        # a filter's result, a slice and a sum of lists are new lists, the template's own
        (
            "{% set xs = messages | map(attribute='role') | list %}{% set _ = xs.append('end') %}"
            "{{ xs | join(' ') }} {{ messages | length }}",
            "system user end 2",
        ),
        (
            "{% set xs = messages[1:] %}{{ xs.pop(0).role }} {{ xs | length }} "
            "{{ messages | length }}",
            "user 0 2",
        ),
        (
            "{% set xs = [1] + messages %}{% set _ = xs.append(2) %}{{ xs | length }} "
            "{{ messages | length }}",
            "4 2",
        ),
        (
            "{% set xs = messages | default([]) %}{% set _ = xs.append(1) %}"
            "{{ messages | length }}",
            "2",
        ),
    ],
)
def test_a_template_modifies_the_lists_it_builds(source: str, expected: str) -> None:
    assert _render(source) == expected


@pytest.mark.parametrize(
    ("source", "kind", "method"),
    [
        ("{{ messages.append({'role': 'system'}) }}", "list", "append"),
        ("{{ messages.pop() }}", "list", "pop"),
        ("{% for m in messages %}{{ m.update({'content': 'x'}) }}{% endfor %}", "dict", "update"),
        ("{{ tools[0].function.parameters.required.append('unit') }}", "list", "append"),
        ("{{ tools[0].function.parameters.required.pop() }}", "list", "pop"),
        ("{% set xs = [tools] %}{{ xs[0].append(1) }}", "list", "append"),
        # on its own lists, only what llama.cpp's Jinja offers: append and pop
        ("{% set xs = [] %}{{ xs.extend([1]) }}", "list", "extend"),
        ("{% set xs = [] %}{{ xs.insert(0, 1) }}", "list", "insert"),
        ("{% set xs = [1] %}{{ xs.clear() }}", "list", "clear"),
        ("{% set d = {} %}{{ d.update({'a': 1}) }}", "dict", "update"),
    ],
)
def test_what_the_template_is_given_stays_immutable(source: str, kind: str, method: str) -> None:
    tools = [copy.deepcopy(TOOL)]
    error = _refusal(source, tools=tools)
    assert error.problem is ChatTemplateProblem.UNSAFE
    assert f"tried to modify a {kind} with {method!r}, which is not allowed" in str(error)


def test_the_callers_chat_and_tools_are_untouched() -> None:
    tools = [copy.deepcopy(TOOL)]
    source = (
        "{% set xs = tools | list %}{% set _ = xs.pop() %}"
        "{% set ys = tools[0].function.parameters.required | list %}{% set _ = ys.append('u') %}"
        "{{ ys | join(',') }}"
    )
    assert _render(source, tools=tools) == "city,u"
    assert tools == [TOOL]


def test_an_own_list_grows_no_further_than_any_list() -> None:
    limits = RenderLimits(max_items=1000)
    source = "{% set xs = [] %}{% for i in range(2000) %}{% set _ = xs.append(i) %}{% endfor %}"
    error = _refusal(source, limits=limits)
    assert error.problem is ChatTemplateProblem.LIMIT
    assert "a list of 1,001 items (the limit is 1,000)" in str(error)


def test_appending_counts_towards_the_work_of_a_rendering() -> None:
    limits = RenderLimits(max_work=500)
    source = "{% set xs = [] %}{% for i in range(600) %}{% set _ = xs.append(1) %}{% endfor %}"
    error = _refusal(source, limits=limits)
    assert error.problem is ChatTemplateProblem.LIMIT
    assert "built more than 500 characters in total" in str(error)


def test_appending_and_popping_forever_is_stopped_by_the_time_limit() -> None:
    source = (
        "{% set xs = [] %}{% for i in range(100000) %}{% for j in range(100000) %}"
        "{% set _ = xs.append(j) %}{% set _ = xs.pop() %}{% endfor %}{% endfor %}"
    )
    error = _refusal(source, limits=RenderLimits(time_s=0.2))
    assert error.problem is ChatTemplateProblem.LIMIT
    assert "ran longer than 0.2 s" in str(error)


@pytest.mark.parametrize("write", ["{{ xs }}", "{{ xs | string }}", "{{ '' ~ xs }}"])
def test_a_list_holding_itself_is_refused_when_written(write: str) -> None:
    error = _refusal("{% set xs = [] %}{% set _ = xs.append(xs) %}" + write)
    assert error.problem is ChatTemplateProblem.LIMIT


def test_appending_to_the_list_being_looped_over_stops_at_the_item_bound() -> None:
    source = "{% set xs = [1] %}{% for x in xs %}{% set _ = xs.append(x) %}{% endfor %}"
    error = _refusal(source, limits=RenderLimits(max_items=1000))
    assert error.problem is ChatTemplateProblem.LIMIT
    assert "a list of 1,001 items" in str(error)
