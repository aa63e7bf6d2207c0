"""What a request's function calling makes of its prompt, and how its answer is read: the
template must write the tools and the calls, the answer is read in the template's format
(its thinking apart, its calls), and a required call's opening is written as its start."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specchat.host.answer_format.formats import AnswerFormat, format_of
from specchat.host.answer_format.reader import AnswerReader
from specchat.host.errors import invalid

if TYPE_CHECKING:
    from collections.abc import Mapping

    from specchat.engine.session import ChatEngine
    from specchat.host.chat_call import ChatCall


@dataclass(frozen=True)
class ToolPrompt:
    """A request's tools as the prompt and the answer's reading take them.

    Attributes:
        tools: the function definitions the template writes, or None (no call is read).
        answer_format: the format the answer is read in, or None (its text as written).
        answer_prefix: the answer's forced start ("" unless a call is required).
        single: the answer ends after its first call (`parallel_tool_calls` false).
        thinking_prompt: the generation prompt's text from the thinking's opening on
            (`<think>\n`, where the template opened it), read as the answer's start.
    """

    tools: tuple[Mapping[str, Any], ...] | None = None
    answer_format: AnswerFormat | None = None
    answer_prefix: str = ""
    single: bool = False
    thinking_prompt: str = ""

    @property
    def names(self) -> tuple[str, ...]:
        """The functions offered."""
        return tuple(str(tool["function"]["name"]) for tool in self.tools or ())

    def reader(self) -> AnswerReader | None:
        """What reads the answer back, or None where its text is all content (no tools, and
        a format that writes no thinking)."""
        answer_format = self.answer_format
        plain = answer_format is None or (
            self.tools is None and answer_format.thinking is None and answer_format.messages is None
        )
        if plain or answer_format is None:
            return None
        return AnswerReader(
            answer_format,
            tools=self.tools,
            single=self.single,
            thinking_prompt=self.thinking_prompt,
        )


def tool_prompt(engine: ChatEngine, call: ChatCall) -> ToolPrompt:
    """The request's tool prompt on `engine`'s template; ApiError (400) where the template
    cannot write what the request holds, rather than let the model answer without it."""
    request = call.tools
    answer_format = format_of(engine.template.source)
    if request is None and not call.has_tool_history:
        return ToolPrompt(answer_format=answer_format)
    support = engine.template.tool_support()
    template = _template_name(engine)
    if request is not None and not support.tools:
        raise invalid(
            f"{template} does not write tools into the prompt, so this model cannot be offered "
            "functions; send the request without 'tools' (or with tool_choice 'none')",
            param="tools",
            code="tools_unsupported",
        )
    if call.has_tool_history and not support.calls:
        raise invalid(
            f"{template} does not write tool calls into the prompt, so this model cannot read "
            "a chat that holds them",
            param="messages",
            code="tools_unsupported",
        )
    if request is None:
        return ToolPrompt(answer_format=answer_format)
    syntax = answer_format.tools
    prefix = "" if request.choice == "auto" else syntax.prefix(request.function or None)
    return ToolPrompt(request.tools, answer_format, prefix, single=not request.parallel)


def _template_name(engine: ChatEngine) -> str:
    """The template, named for people: which it is and whose."""
    choice = engine.template_choice
    model = Path(engine.target.path).name
    if choice.guessed:
        return f"the {choice.label} chat template SpecChat chose for {model}"
    if choice.family is None:
        return f"{model}'s own chat template"
    return f"{model}'s chat template ({choice.label})"
