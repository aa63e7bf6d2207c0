"""Which format a model writes its answer in, chosen from its chat template's text as
llama.cpp chooses (common/chat.cpp's `common_chat_try_specialized_template`): its tool calls'
syntax and its thinking's markers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from specchat.engine.templates.thinking import (
    APRIEL16_TAGS,
    COHERE_TAGS,
    GEMMA4_CHANNEL,
    MINIMAX_M3_TAGS,
    MISTRAL_TAGS,
    SEED_TAGS,
    THINK_TAGS,
)
from specchat.host.answer_format import (
    functionary,
    gemma4_calls,
    harmony,
    json_lists,
    kimi_k3,
    minimax_m3,
    muse_glimmer,
    pythonic,
    qwen_xml,
    tagged_calls,
)
from specchat.host.answer_format.json_calls import (
    HERMES,
    Markup,
    Opening,
    ParsedCall,
    Schemas,
    ToolSyntax,
    syntax_of,
)
from specchat.host.answer_format.messages import Segment
from specchat.host.answer_format.thinking_space import analysed
from specchat.host.answer_format.thinking_splitter import ThinkingSyntax


@dataclass(frozen=True)
class AnswerFormat:
    """How one family writes an answer.

    Attributes:
        key: short id ("qwen-xml").
        label: for people.
        tools: its tool calls' syntax.
        thinking: its thinking's markers, or None where it writes none.
        stops: texts at which an answer with tools ends: the model hands over to the tool
            (Gemma 4 writes `<|tool_response>` after its calls, and would go on to write
            the result itself).
        messages: the reading of an answer written as a run of messages (gpt-oss's
            `harmony.segments`), or None; `tools` and `thinking` then only name it.
        spelled: marker tokens the answer's text must spell for it to be read (the
            engine renders control tokens as nothing otherwise).
        dropped: markers around the answer's text that are no part of it (Cohere's
            `<|START_RESPONSE|>`).
    """

    key: str
    label: str
    tools: ToolSyntax
    thinking: ThinkingSyntax | None = None
    stops: tuple[str, ...] = ()
    messages: Callable[..., list[Segment]] | None = None
    spelled: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()

    def markers(self) -> tuple[str, ...]:
        """Every marker the answer is read by, for the engine to spell in the answer's text
        where the vocabulary makes it a control token (llama.cpp's server keeps a format's
        `preserved_tokens` in the text it parses)."""
        texts = [*self.spelled, *self.dropped, *self.stops]
        for opening in self.tools.openings:
            texts += [opening.marker, opening.closing]
        if self.thinking is not None:
            texts += [self.thinking.start, *self.thinking.ends, *self.thinking.stops]
        return tuple(dict.fromkeys(text for text in texts if text.strip()))


#: Qwen3-Coder, Qwen3.5, Nemotron Nano 3: `<tool_call>\n<function=name>\n<parameter=key>\n
#: value\n</parameter>\n</function>\n</tool_call>`.
QWEN_XML = ToolSyntax(
    "qwen-xml",
    "Qwen XML <function=...>",
    (Opening("<tool_call>", closing="</tool_call>"),),
    name_first=False,
    markup=Markup(
        qwen_xml.read_calls,
        before_name="<tool_call>\n<function=",
        after_name=">\n",
        head=qwen_xml.head,
        so_far=qwen_xml.arguments_so_far,
        held=qwen_xml.wants_json,
    ),
)
#: Qwen3-Coder: the same, and a call that leaves out `<tool_call>`, opened by
#: `<function=name>` for a function offered (llama.cpp's `tool_call_starts` for it).
QWEN_CODER = replace(
    QWEN_XML, named_opening=Opening("<function={name}>", closing="</tool_call>", kept=True)
)
#: Gemma 4: `<|tool_call>call:name{key:<|"|>text<|"|>,n:3}<tool_call|>`.
GEMMA4 = ToolSyntax(
    "gemma4",
    "Gemma 4 <|tool_call>",
    (Opening("<|tool_call>", closing="<tool_call|>"),),
    name_first=False,
    markup=Markup(gemma4_calls.read_calls, before_name="<|tool_call>call:", after_name="{"),
)

#: DeepSeek V3.1 and R1: `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>name<｜tool▁sep｜>{...}
#: <｜tool▁call▁end｜><｜tool▁calls▁end｜>`.
DEEPSEEK = ToolSyntax(
    "deepseek",
    "DeepSeek <｜tool▁calls▁begin｜>",
    (Opening("<｜tool▁calls▁begin｜>", closing="<｜tool▁calls▁end｜>"),),
    name_first=False,
    markup=Markup(
        tagged_calls.read_deepseek,
        before_name="<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>",
        after_name="<｜tool▁sep｜>",
    ),
)
#: GLM 4.5 to 4.7: `<tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>`.
GLM = ToolSyntax(
    "glm",
    "GLM <arg_key>",
    (Opening("<tool_call>", closing="</tool_call>"),),
    name_first=False,
    markup=Markup(tagged_calls.read_glm, before_name="<tool_call>", after_name="\n"),
)
#: Kimi K2: `<|tool_calls_section_begin|><|tool_call_begin|>functions.name:0
#: <|tool_call_argument_begin|>{...}<|tool_call_end|><|tool_calls_section_end|>`.
KIMI = ToolSyntax(
    "kimi",
    "Kimi K2 <|tool_calls_section_begin|>",
    (Opening("<|tool_calls_section_begin|>", closing="<|tool_calls_section_end|>"),),
    name_first=False,
    markup=Markup(
        tagged_calls.read_kimi,
        before_name="<|tool_calls_section_begin|><|tool_call_begin|>functions.",
        after_name=":0<|tool_call_argument_begin|>",
    ),
)
#: MiniMax M2: `<minimax:tool_call><invoke name="f"><parameter name="k">v</parameter>
#: </invoke></minimax:tool_call>`.
MINIMAX = ToolSyntax(
    "minimax",
    "MiniMax <minimax:tool_call>",
    (Opening("<minimax:tool_call>", closing="</minimax:tool_call>"),),
    name_first=False,
    markup=Markup(
        tagged_calls.read_minimax,
        before_name='<minimax:tool_call>\n<invoke name="',
        after_name='">\n',
    ),
)

#: Nemotron Nano 2: `<TOOLCALL>[{"name": ..., "arguments": {...}}]</TOOLCALL>`.
NEMOTRON = ToolSyntax(
    "nemotron",
    "Nemotron <TOOLCALL>",
    (Opening("<TOOLCALL>", closing="</TOOLCALL>"),),
    name_first=False,
    markup=Markup(
        json_lists.read_json_list,
        before_name='<TOOLCALL>[{"name": "',
        after_name='", "arguments": ',
    ),
)

#: DeepSeek V3.2 (`function_calls`) and V4 (`tool_calls`): `<｜DSML｜invoke name="f">` and
#: `<｜DSML｜parameter name="k" string="true|false">v</｜DSML｜parameter>`.
DSML = ToolSyntax(
    "dsml",
    "DeepSeek DSML",
    tuple(
        Opening(f"<｜DSML｜{block}>", closing=f"</｜DSML｜{block}>")
        for block in ("function_calls", "tool_calls")
    ),
    name_first=False,
    markup=Markup(
        tagged_calls.read_dsml,
        before_name='<｜DSML｜tool_calls>\n<｜DSML｜invoke name="',
        after_name='">\n',
    ),
)

#: Apriel 1.5 (`<tool_calls>[...]</tool_calls>`) and MiniMax M1 (objects one a line).
TOOL_CALLS_TAG = ToolSyntax(
    "tool-calls",
    "<tool_calls> JSON",
    (Opening("<tool_calls>", closing="</tool_calls>"),),
    name_first=False,
    markup=Markup(
        json_lists.read_list_or_objects,
        before_name='<tool_calls>[{"name": "',
        after_name='", "arguments": ',
    ),
)
#: Firefunction v2: ` functools[{"name": ..., "arguments": ...}]` to the answer's end.
FUNCTOOLS = ToolSyntax(
    "functools",
    "Firefunction functools[...]",
    (Opening("functools[", kept=True),),
    name_first=False,
    markup=Markup(
        json_lists.read_functools,
        before_name=' functools[{"name": "',
        after_name='", "arguments": ',
    ),
)
#: GigaChat 3.1 (`<|function_call|>{...}`) and 3 (`function call<|role_sep|>\n{...}`).
GIGACHAT = ToolSyntax(
    "gigachat",
    "GigaChat function call",
    (Opening("<|function_call|>"), Opening("<|message_sep|>\n\nfunction call<|role_sep|>")),
    name_first=False,
    markup=Markup(
        json_lists.read_list_or_objects,
        before_name='<|function_call|>{"name": "',
        after_name='", "arguments": ',
    ),
)
#: Apertus: `<|tools_prefix|>[{"name": {...}}]<|tools_suffix|>`.
APERTUS = ToolSyntax(
    "apertus",
    "Apertus <|tools_prefix|>",
    (Opening("<|tools_prefix|>", closing="<|tools_suffix|>"),),
    name_first=False,
    markup=Markup(json_lists.read_keyed_list, before_name='<|tools_prefix|>[{"', after_name='": '),
)
#: Seed-OSS: Qwen's XML between `<seed:tool_call>` tags, thinking in `<seed:think>`.
SEED = replace(
    QWEN_XML,
    key="seed",
    label="Seed-OSS <seed:tool_call>",
    openings=(Opening("<seed:tool_call>", closing="</seed:tool_call>"),),
    markup=replace(QWEN_XML.markup, before_name="<seed:tool_call>\n<function=")
    if QWEN_XML.markup
    else None,
)
SEED_THINK = ThinkingSyntax.of(SEED_TAGS, trim_answer=True)

#: Cohere Command R7B and North (Cohere2 MoE): `<|START_ACTION|>[{"tool_call_id",
#: "tool_name", "parameters"}]<|END_ACTION|>`, thinking between `<|START_THINKING|>` and
#: `<|END_THINKING|>`, text between `<|START_RESPONSE|>` (or `<|START_TEXT|>`) and its end.
COHERE = ToolSyntax(
    "cohere",
    "Cohere <|START_ACTION|>",
    (Opening("<|START_ACTION|>", closing=json_lists.COHERE_END),),
    name_first=False,
    markup=Markup(
        json_lists.read_cohere,
        before_name='<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "',
        after_name='", "parameters": ',
    ),
)
COHERE_THINK = ThinkingSyntax.of(COHERE_TAGS, trim_answer=True)
COHERE_TEXT = ("<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|START_TEXT|>", "<|END_TEXT|>")

#: LFM2 and LFM2.5: `<|tool_call_start|>[name(key='text', n=3)]<|tool_call_end|>`.
LFM2 = ToolSyntax(
    "lfm2",
    "LFM2 <|tool_call_start|>",
    (Opening("<|tool_call_start|>", closing="<|tool_call_end|>"),),
    name_first=False,
    markup=Markup(pythonic.read_calls, before_name="<|tool_call_start|>[", after_name="("),
)


def _no_block(body: str, schemas: Schemas) -> list[ParsedCall] | None:
    """A format read as a run of messages has no call blocks: its calls are messages."""
    del body, schemas
    return None


#: gpt-oss: a call is a message `to=functions.name` (its forced start written so).
HARMONY_CALLS = ToolSyntax(
    "harmony",
    "gpt-oss to=functions.",
    (),
    name_first=False,
    markup=Markup(
        _no_block,
        before_name=" to=functions.",
        after_name="<|channel|>commentary json<|message|>",
    ),
)
#: Kimi K3: a call is a `call` section in `tools`.
KIMI_K3_CALLS = ToolSyntax(
    "kimi-k3",
    "Kimi K3 <|open|>call",
    (),
    name_first=False,
    markup=Markup(
        _no_block,
        before_name='<|close|>think<|sep|><|open|>tools<|sep|><|open|>call tool="',
        after_name='" index="1"<|sep|>',
    ),
)
#: Muse Glimmer: a call is a message to the function, its arguments in ATEM markup.
MUSE_CALLS = ToolSyntax(
    "muse-glimmer",
    "Muse Glimmer to=name",
    (),
    name_first=False,
    markup=Markup(
        _no_block,
        before_name=" to=",
        after_name="<|message|><atem:function_calls>\n",
    ),
)
#: Functionary 3.2: a call is a message to the function (the prompt wrote its `>>>`).
FUNCTIONARY_CALLS = ToolSyntax(
    "functionary",
    "Functionary >>>name",
    (),
    name_first=False,
    markup=Markup(_no_block, before_name="", after_name="\n"),
)

#: MiniMax M3: `]<]minimax[>[<tool_call>` … `<invoke name="f">` with a parameter's tag
#: around its value, each tag after the namespace mark; thinking in `<mm:think>`.
MINIMAX_M3 = ToolSyntax(
    "minimax-m3",
    "MiniMax M3 ]<]minimax[>[<tool_call>",
    (Opening(f"{minimax_m3.MARK}<tool_call>", closing=f"{minimax_m3.MARK}</tool_call>"),),
    name_first=False,
    markup=Markup(
        minimax_m3.read_calls,
        before_name=f'{minimax_m3.MARK}<tool_call>\n{minimax_m3.MARK}<invoke name="',
        after_name='">',
    ),
)
#: A turn without thinking starts with a bare `</mm:think>`: a lone end, dropped.
MINIMAX_M3_THINK = ThinkingSyntax.of(MINIMAX_M3_TAGS, anywhere=True)

#: `<think>…</think>`: Qwen3, QwQ, DeepSeek R1 and their distills, most others (white
#: space around it kept, as llama.cpp's template-analysing reader keeps it).
THINK = ThinkingSyntax.of(THINK_TAGS)
#: Qwen3.5 and Nemotron 3 may call a tool straight from their thinking (llama.cpp's
#: `thinking_end_tags` for them name `<tool_call>`).
THINK_TO_CALL = ThinkingSyntax.of(
    THINK_TAGS, stops=("<tool_call>",), trim_reasoning=True, trim_answer=True
)
#: The thinking of GLM, MiniMax M2, and of templates that write reasoning_content
#: (Qwen3): white space at its start and after it dropped.
THINK_TRIMMED = ThinkingSyntax.of(THINK_TAGS, trim_reasoning=True, trim_answer=True)
#: Nemotron Nano 2's: white space at its start dropped.
THINK_TRIMMED_START = ThinkingSyntax.of(THINK_TAGS, trim_reasoning=True)
#: Gemma 4's thought channel.
GEMMA4_THOUGHT = ThinkingSyntax.of(GEMMA4_CHANNEL, anywhere=True, trim_reasoning=True)
#: Apriel 1.6's: its generation prompt opens it with "Here are my reasoning steps:", the
#: answer after `[BEGIN FINAL RESPONSE]` (llama.cpp's template analysis finds these two as
#: its reasoning's markers; an answer without the latter is all reasoning, calls too).
APRIEL16_THINK = ThinkingSyntax.of(APRIEL16_TAGS, prompt_reasons=True)
#: Magistral and Ministral 3's reasoning.
MISTRAL_THINK = ThinkingSyntax.of(MISTRAL_TAGS)

#: Ling 3's template, which llama.cpp reads with a parser of its own (common/chat.cpp).
_LING3 = "<role>ASSISTANT</role>"
#: The Qwen template that writes `<tool_call><function=` on one line, which llama.cpp's
#: XML reader leaves to its general one.
_QWEN_XML_ONE_LINE = "'<tool_call><function=' ~ tool_call.name ~ '>'"


def format_of(template: str) -> AnswerFormat:
    """The format a chat template's model answers in, from the template's text."""
    if ">>>all" in template and ">>>${recipient}" in template:
        return AnswerFormat(
            "functionary", "Functionary 3.2", FUNCTIONARY_CALLS, messages=functionary.segments
        )
    if "<atem:function_calls>" in template and "<|eom|>" in template:
        return AnswerFormat(
            "muse-glimmer",
            "Muse Glimmer",
            MUSE_CALLS,
            messages=muse_glimmer.segments,
            spelled=muse_glimmer.MARKERS,
        )
    if all(marker in template for marker in ("<|open|>", "<|close|>", "<|end_of_msg|>")):
        return AnswerFormat(
            "kimi-k3", "Kimi K3", KIMI_K3_CALLS, messages=kimi_k3.segments, spelled=kimi_k3.MARKERS
        )
    if "<|channel|>" in template:
        return AnswerFormat(
            "harmony",
            "gpt-oss harmony",
            HARMONY_CALLS,
            messages=harmony.segments,
            spelled=harmony.MARKERS,
        )
    thinking = None
    if "<think>" in template:
        # A template that writes a message's reasoning_content shows llama.cpp's analysis
        # the space it puts around the thinking, which its reader then drops.
        thinking = THINK_TRIMMED if "reasoning_content" in template else THINK
    if "<|tool_calls_section_begin|>" in template and "<|tool_call_begin|>" in template:
        return AnswerFormat("kimi", "Kimi K2", KIMI, thinking)
    if minimax_m3.MARK in template and "<invoke name=" in template:
        return AnswerFormat(
            "minimax-m3", "MiniMax M3", MINIMAX_M3, MINIMAX_M3_THINK, spelled=(minimax_m3.MARK,)
        )
    if "<minimax:tool_call>" in template and "<invoke name=" in template:
        return AnswerFormat("minimax", "MiniMax M2", MINIMAX, _analysed(template, thinking))
    if "'<|tool_call>call:'" in template:
        return AnswerFormat("gemma4", "Gemma 4", GEMMA4, GEMMA4_THOUGHT, ("<|tool_response>",))
    if (
        all(marker in template for marker in ("<tool_call>", "<function=", "<parameter="))
        and _QWEN_XML_ONE_LINE not in template
    ):
        if thinking is None:
            return AnswerFormat("qwen-xml", "Qwen3-Coder XML", QWEN_CODER)
        return AnswerFormat("qwen-xml", "Qwen XML", QWEN_XML, analysed(template, THINK_TO_CALL))
    if "<arg_key>" in template and "<tool_call>" in template:
        if _LING3 in template:  # llama.cpp reads Ling 3 with a parser of its own
            return AnswerFormat("glm", "GLM", GLM, thinking and THINK_TRIMMED)
        return AnswerFormat("glm", "GLM", GLM, _analysed(template, thinking))
    if "<|START_ACTION|>" in template and (
        "<|START_RESPONSE|>" in template or "<|START_TEXT|>" in template
    ):
        return AnswerFormat("cohere", "Cohere", COHERE, COHERE_THINK, dropped=COHERE_TEXT)
    lfm2 = "<|tool_list_start|>" in template and "<|tool_list_end|>" in template
    if lfm2 or ("List of tools: [" in template and "<|tool_list_start|>" not in template):
        return AnswerFormat("lfm2", "LFM2", LFM2, thinking)
    if "<seed:tool_call>" in template:
        return AnswerFormat("seed", "Seed-OSS", SEED, SEED_THINK)
    if "<|tools_prefix|>" in template:
        return AnswerFormat("apertus", "Apertus", APERTUS, thinking)
    if "functools[" in template:
        return AnswerFormat("functools", "Firefunction", FUNCTOOLS, thinking)
    if "<|role_sep|>" in template and "<|message_sep|>" in template:
        return AnswerFormat("gigachat", "GigaChat", GIGACHAT, thinking)
    if "<tool_calls>" in template and "</tool_calls>" in template:
        if all(marker in template for marker in (*APRIEL16_THINK.ends, APRIEL16_THINK.start)):
            apriel = analysed(template, APRIEL16_THINK)
            return AnswerFormat("tool-calls", "Apriel 1.6", TOOL_CALLS_TAG, apriel)
        return AnswerFormat("tool-calls", "<tool_calls>", TOOL_CALLS_TAG, thinking)
    if "dsml_token" in template and "DSML" in template:
        block = "function_calls" if "function_calls" in template else "tool_calls"
        assert DSML.markup is not None
        start = f'<｜DSML｜{block}>\n<｜DSML｜invoke name="'
        dsml = replace(DSML, markup=replace(DSML.markup, before_name=start))
        return AnswerFormat("dsml", "DeepSeek DSML", dsml, thinking)
    if "<TOOLCALL>" in template:
        return AnswerFormat("nemotron", "Nemotron", NEMOTRON, thinking and THINK_TRIMMED_START)
    if "<｜tool▁calls▁begin｜>" in template:
        return AnswerFormat("deepseek", "DeepSeek", DEEPSEEK, _analysed(template, thinking))
    tools = syntax_of(template)
    if thinking is None and "[THINK]" in template:
        thinking = MISTRAL_THINK
    elif tools is HERMES:
        thinking = _analysed(template, thinking)
    return AnswerFormat(tools.key, tools.label, tools, thinking)


def _analysed(template: str, thinking: ThinkingSyntax | None) -> ThinkingSyntax | None:
    """`<think>` as llama.cpp's template analysis has it for a template it reads with its
    generated parser (the families above without a parser of their own)."""
    return None if thinking is None else analysed(template, THINK)
