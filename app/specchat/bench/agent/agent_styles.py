"""The tool-call styles the agent bench runs its tasks in: the target's own template (the
default target's, Qwen2.5's, writes Hermes calls: arguments as JSON, a file's text a JSON
string with its line breaks escaped), or Qwen3.5's (XML-style: each argument written raw
inside `<parameter=…>`), rendered for the same target."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from specchat.engine.session import ChatEngine

#: The styles by name: the target's own template, or the XML-style one below.
STYLES = ("own", "xml")
#: The template XML-style calls are rendered through (shipped in data/chat_templates).
XML_TEMPLATE = "Qwen3.5-4B.jinja"
#: Its variables: no thinking (the default target was not trained to think).
XML_VARIABLES: dict[str, Any] = {"enable_thinking": False}


@contextlib.contextmanager
def speaking(engine: ChatEngine, style: str) -> Iterator[dict[str, Any]]:
    """The engine's chats rendered in `style` while inside (its own template again after);
    yields the template variables each request sends."""
    if style == "own":
        yield {}
        return
    if style != "xml":
        raise ValueError(f"no agent style {style!r}: {', '.join(STYLES)}")
    from specchat import paths
    from specchat.engine.templates.chat_template import ChatTemplate
    from specchat.engine.templates.prompt_tokens import PromptTokenizer

    saved = engine.template, engine.prompt_tokens
    source = paths.chat_template_path(XML_TEMPLATE).read_text(encoding="utf-8")
    target = engine.target
    template = ChatTemplate(
        source,
        bos_token=target.token_text(target.bos) if target.bos >= 0 else "",
        eos_token=target.token_text(target.eos) if target.eos >= 0 else "",
    )
    choice = engine.template_choice
    engine.template = template
    engine.prompt_tokens = PromptTokenizer(
        target, template, markers=choice.markers + choice.end_of_turn
    )
    try:
        yield dict(XML_VARIABLES)
    finally:
        engine.template, engine.prompt_tokens = saved


def style_label(engine: ChatEngine) -> str:
    """The call format the engine's template speaks now, for the report."""
    from specchat.host.answer_format.formats import format_of

    return format_of(engine.template.source).label
