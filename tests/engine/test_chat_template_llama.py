"""SpecChat renders every chat as llama.cpp does, through every template llama.cpp ships.

tests/fixtures/chat_oracle holds llama.cpp's own prompts (chat-oracle over common/chat.h)
for fixed chats through the ~70 templates of llama.cpp's models/templates. Each chat is
read as `specchat serve` reads a request (serve.parsing), rendered by ChatTemplate with the
same bos/eos, date and enable_thinking, and must give llama.cpp's prompt exactly, or be
refused by both. The renderings that differ for a reason a user would not care about, or
that SpecChat keeps on purpose, are listed with the reason; the list is exact: a listed
one that starts to match fails too, so the list never outlives its reason.
"""

from __future__ import annotations

from itertools import groupby

import pytest

from specchat.engine.templates.chat_template import ChatTemplate, ChatTemplateError
from tests.helpers.chat_oracle import RenderCase, as_served, conversation, inputs, now, render_cases

#: Python and llama.cpp's Jinja write a str's repr otherwise when it holds both quote kinds
#: ('The city\'s name, e.g. "Paris".' against "The city's name, e.g. \"Paris\"."): these
#: templates print tools as Python objects, and our tool description holds both.
REPR_QUOTES = "a str's repr with both quote kinds: Python's quoting, not llama.cpp's"
#: Kimi K2's templates queue call ids with list.append; the sandbox is Jinja's immutable
#: one and refuses to modify a list, a guarantee kept (llama.cpp's Jinja allows it).
IMMUTABLE = "list.append, which the immutable sandbox refuses"
#: MiniCPM5 writes a nested argument value with {{ }}: Python writes a mapping as its repr,
#: llama.cpp's Jinja as nothing (and a list as its items run together: `[1, "b"]` as
#: `1b`); the repr is what the model met in training, under transformers.
MAPPING_TEXT = "a mapping written as text: Python's repr, where llama.cpp writes nothing"

KNOWN: dict[str, str] = {
    **{
        f"{template}/{chat}/thinking": REPR_QUOTES
        for template in ("Apriel-1.6-15b-Thinker-fixed", "unsloth-Apriel-1.5")
        for chat in ("tools_declared", "tool_result", "tool_answered", "parallel_calls")
    },
    **{
        f"{template}/{chat}/thinking": IMMUTABLE
        for template in ("Kimi-K2-Instruct", "Kimi-K2-Thinking")
        for chat in ("tool_result", "tool_answered", "parallel_calls")
    },
    "openbmb-MiniCPM5-1B/parallel_calls/thinking": MAPPING_TEXT,
    "openbmb-MiniCPM5-1B/parallel_calls/no-thinking": MAPPING_TEXT,
}

CASES = {template: list(cases) for template, cases in groupby(render_cases(), lambda c: c.template)}


def _render(template: ChatTemplate, case: RenderCase) -> str | None:
    """SpecChat's prompt for the case, or None where it refuses."""
    messages, tools = as_served(conversation(case.conversation))
    try:
        return template.render(
            messages, tools=tools, extra={"enable_thinking": case.enable_thinking}, now=now()
        )
    except ChatTemplateError:
        return None


def test_every_template_of_llama_cpp_is_recorded() -> None:
    assert len(CASES) >= 70
    assert {key.split("/")[0] for key in KNOWN} <= set(CASES)
    every = {case.key for cases in CASES.values() for case in cases}
    assert set(KNOWN) <= every


@pytest.mark.parametrize("name", sorted(CASES))
def test_renders_as_llama_cpp(name: str) -> None:
    data = inputs()
    template = ChatTemplate(
        CASES[name][0].source, bos_token=data["bos_token"], eos_token=data["eos_token"]
    )
    wrong, matched = [], []
    for case in CASES[name]:
        prompt = _render(template, case)
        same = prompt == case.prompt  # both None: both refused
        if case.key in KNOWN and same:
            matched.append(case.key)
        elif case.key not in KNOWN and not same:
            wrong.append(f"{case.key}:\n  llama.cpp {case.prompt!r}\n  SpecChat  {prompt!r}")
    assert not wrong, "renders otherwise than llama.cpp:\n" + "\n".join(wrong)
    assert not matched, f"listed as different but now the same (drop them from KNOWN): {matched}"
