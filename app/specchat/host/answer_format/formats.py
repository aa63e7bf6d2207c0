"""Which format a model writes its answer in, chosen from its chat template's text as
llama.cpp chooses (common/chat.cpp's `common_chat_try_specialized_template`): its tool calls'
syntax and its thinking's markers."""

from __future__ import annotations

from dataclasses import dataclass

from specchat.host.answer_format import gemma4, qwen_xml
from specchat.host.answer_format.json_calls import Markup, Opening, ToolSyntax, syntax_of
from specchat.host.answer_format.thinking import ThinkingSyntax


@dataclass(frozen=True)
class AnswerFormat:
    """How one family writes an answer.

    Attributes:
        key: short id ("qwen-xml").
        label: for people.
        tools: its tool calls' syntax.
        thinking: its thinking's markers, or None where it writes none.
    """

    key: str
    label: str
    tools: ToolSyntax
    thinking: ThinkingSyntax | None = None


#: Qwen3-Coder, Qwen3.5, Nemotron Nano 3: `<tool_call>\n<function=name>\n<parameter=key>\n
#: value\n</parameter>\n</function>\n</tool_call>`.
QWEN_XML = ToolSyntax(
    "qwen-xml",
    "Qwen XML <function=...>",
    (Opening("<tool_call>", closing="</tool_call>"),),
    name_first=False,
    markup=Markup(qwen_xml.read_calls, before_name="<tool_call>\n<function=", after_name=">\n"),
)
#: Gemma 4: `<|tool_call>call:name{key:<|"|>text<|"|>,n:3}<tool_call|>`.
GEMMA4 = ToolSyntax(
    "gemma4",
    "Gemma 4 <|tool_call>",
    (Opening("<|tool_call>", closing="<tool_call|>"),),
    name_first=False,
    markup=Markup(gemma4.read_calls, before_name="<|tool_call>call:", after_name="{"),
)

#: `<think>…</think>`: Qwen3, Qwen3.5, QwQ, DeepSeek R1 and their distills, most others.
THINK = ThinkingSyntax("<think>", ("</think>",))
#: Qwen3.5 and Nemotron 3 may call a tool straight from their thinking (llama.cpp's
#: `thinking_end_tags` for them name `<tool_call>`).
THINK_TO_CALL = ThinkingSyntax("<think>", ("</think>",), stops=("<tool_call>",))
#: Gemma 4's thought channel.
GEMMA4_THOUGHT = ThinkingSyntax("<|channel>thought", ("<channel|>",))
#: Magistral and Ministral 3's reasoning.
MISTRAL_THINK = ThinkingSyntax("[THINK]", ("[/THINK]",))

#: The Qwen template that writes `<tool_call><function=` on one line, which llama.cpp's
#: XML reader leaves to its general one.
_QWEN_XML_ONE_LINE = "'<tool_call><function=' ~ tool_call.name ~ '>'"


def format_of(template: str) -> AnswerFormat:
    """The format a chat template's model answers in, from the template's text."""
    if "'<|tool_call>call:'" in template:
        return AnswerFormat("gemma4", "Gemma 4", GEMMA4, GEMMA4_THOUGHT)
    if (
        all(marker in template for marker in ("<tool_call>", "<function=", "<parameter="))
        and _QWEN_XML_ONE_LINE not in template
    ):
        thinking = THINK_TO_CALL if "<think>" in template else None
        return AnswerFormat("qwen-xml", "Qwen XML", QWEN_XML, thinking)
    tools = syntax_of(template)
    thinking = None
    if "<think>" in template:
        thinking = THINK
    elif "[THINK]" in template:
        thinking = MISTRAL_THINK
    return AnswerFormat(tools.key, tools.label, tools, thinking)
