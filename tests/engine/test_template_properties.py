"""Templates generated from the sandbox's own builders and filters render within its limits."""

from __future__ import annotations

import time
import tracemalloc

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specchat.engine.templates.guards import ChatTemplateError, RenderLimits
from specchat.engine.templates.sandbox import SandboxTemplate

#: Small limits, so that a bound checked only after building shows as memory far beyond them.
LIMITS = RenderLimits(
    time_s=0.5, max_chars=100_000, max_work=1_000_000, max_range=10_000, max_items=10_000
)
#: What one rendering may allocate: every value is refused past max_chars characters (four
#: bytes each at most) or max_items items, and all of them together past max_work.
PEAK_BYTES = 24_000_000
#: A rendering past its time limit stops at the next hook; one call between hooks is short
#: with these sizes (the host process stops the long ones, tested elsewhere).
TIME_S = LIMITS.time_s + 1.5
CONVERSATION = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]

SIZES = st.sampled_from(["0", "1", "3", "100", "10000", "10**6", "10**9", "-1"])
LEAVES = st.one_of(
    st.sampled_from(["'x'", "'ab'", "''", "'\\u00e9'", "messages", "messages[0].content"]),
    st.sampled_from(["[1, 'a']", "{'k': 'v'}", "range(100)", "none", "1.5"]),
    SIZES,
)
#: The sandbox's builders: operators, string methods and the filters that make or grow a
#: value, each applied to a generated operand.
UNARY = [
    "({}) * {n}",
    "({}) ~ ({})",
    "({}) + ({})",
    "[({}), ({})]",
    "({}) | list",
    "({}) | sort",
    "({}) | unique | list",
    "({}) | reverse | list",
    "({}) | batch({n}) | list",
    "({}) | slice(3) | list",
    "({}) | join(({}))",
    "({}) | string",
    "({}) | tojson",
    "({}) | pprint",
    "({}) | center({n})",
    "({}) | indent({n})",
    "({}) | wordwrap(5)",
    "({}) | replace('', ({}))",
    "({}) | format(({}))",
    "'{{0}}{{0}}'.format(({}))",
    "({}) | map('string') | list",
    "({}) | select | list",
    "({}) | dictsort",
    "({}) | length",
    "({}) | first",
    "({}) | items | list",
    "({}).ljust({n})",
    "({}).replace('', ({}))",
    "'%s%s' % (({}), ({}))",
    "strftime_now(({}))",
]


def _build(form: str, parts: list[str], n: str) -> str:
    holes = form.count("({})")
    return form.format(*parts[:holes], n=n) if holes else form.format(n=n)


@st.composite
def expressions(draw: st.DrawFn, depth: int = 3) -> str:
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(LEAVES)
    form = draw(st.sampled_from(UNARY))
    parts = [draw(expressions(depth - 1)) for _ in range(form.count("({})"))]
    return _build(form, parts, draw(SIZES))


@st.composite
def templates(draw: st.DrawFn) -> str:
    body = draw(expressions())
    shape = draw(st.integers(0, 3))
    if shape == 0:
        return "{{ " + body + " }}"
    if shape == 1:
        return "{% set x = " + body + " %}{{ x }}{{ x }}"
    if shape == 2:
        inner = draw(expressions(2))
        return "{% for i in " + body + " %}{{ " + inner + " }}{% endfor %}"
    return "{% for m in messages %}{{ m.content ~ (" + body + ") }}{% endfor %}"


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(templates())
def test_generated_templates_render_within_time_and_memory_limits(source: str) -> None:
    started = time.perf_counter()
    tracemalloc.start()
    try:
        try:
            output = SandboxTemplate(source, limits=LIMITS).render(CONVERSATION)
        except ChatTemplateError:
            output = ""
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    elapsed = time.perf_counter() - started
    assert len(output) <= LIMITS.max_chars
    assert peak < PEAK_BYTES, f"{peak / 1e6:.0f} MB for {source}"
    assert elapsed < TIME_S, f"{elapsed:.1f} s for {source}"
