"""SpecChat renders every chat as llama.cpp does, through every template llama.cpp ships.

tests/fixtures/chat_oracle holds llama.cpp's own prompts (chat-oracle over common/chat.h)
for fixed chats through the ~70 templates of llama.cpp's models/templates. Each chat is
read as `specchat serve` reads a request (serve.parsing), rendered by ChatTemplate with the
same bos/eos, date and enable_thinking, and must give llama.cpp's prompt exactly, or be
refused by both: every one of them, none excepted.
"""

from __future__ import annotations

from itertools import groupby

import pytest

from specchat.engine.templates.chat_template import ChatTemplate, ChatTemplateError
from tests.helpers.chat_oracle import RenderCase, as_served, conversation, inputs, now, render_cases

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


@pytest.mark.parametrize("name", sorted(CASES))
def test_renders_as_llama_cpp(name: str) -> None:
    data = inputs()
    template = ChatTemplate(
        CASES[name][0].source, bos_token=data["bos_token"], eos_token=data["eos_token"]
    )
    wrong = []
    for case in CASES[name]:
        prompt = _render(template, case)
        if prompt != case.prompt:  # both None: both refused
            wrong.append(f"{case.key}:\n  llama.cpp {case.prompt!r}\n  SpecChat  {prompt!r}")
    assert not wrong, "renders otherwise than llama.cpp:\n" + "\n".join(wrong)
