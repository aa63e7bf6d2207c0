"""An answer's prompt, prepared alike for the window and the API: the chat rendered with its
template variables and tokenized, and whether the prompt left the answer inside thinking."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from specchat.engine.context import ContextPlan, OverflowPolicy
from specchat.host.answer_format.formats import AnswerFormat, format_of

if TYPE_CHECKING:
    from specchat.engine.session import ChatEngine
    from specchat.engine.templates.chat_template import ChatMessage

#: How much of a prompt's end is read for a thinking block its generation prompt opened:
#: the generation prompt's few tokens (and a forced start), with room.
THINKING_TAIL_TOKENS = 16


@dataclass(frozen=True)
class ThinkingOpened:
    """The thinking the generation prompt wrote, which llama.cpp reads as the answer's start.

    Attributes:
        start: the marker that opened it (Qwen3.5's `<think>`).
        prompt_part: the prompt's text from that marker on (`<think>\n`; SmolLM3's closed
            `<think>\n\n</think>\n`), which the answer's reader reads first.
        open: the prompt left it open: the answer continues inside it.
    """

    start: str
    prompt_part: str
    open: bool


@dataclass(frozen=True)
class AnswerPrompt:
    """A chat rendered for the target, ready to answer.

    Attributes:
        tokens: the prompt tokens.
        plan: which messages were kept and which dropped to fit the context.
        thinking: the thinking block the prompt opened, or None.
    """

    tokens: tuple[int, ...]
    plan: ContextPlan
    thinking: ThinkingOpened | None


def answer_prompt(
    engine: ChatEngine,
    messages: Sequence[ChatMessage],
    *,
    max_tokens: int,
    policy: OverflowPolicy = OverflowPolicy.DROP_OLDEST,
    template_kwargs: Mapping[str, Any] | None = None,
    tools: Sequence[Mapping[str, Any]] | None = None,
    answer_prefix: str = "",
    answer_format: AnswerFormat | None = None,
) -> AnswerPrompt:
    """The prompt for answering `messages` (ChatEngine.prepare, whose errors it raises),
    read for a thinking opening in `answer_format` (the template's own when None)."""
    prepared = engine.prepare(
        messages,
        max_tokens=max_tokens,
        policy=policy,
        tools=tools,
        answer_prefix=answer_prefix,
        template_kwargs=template_kwargs,
    )
    if answer_format is None:
        answer_format = format_of(engine.template.source)
    opened = opened_thinking(engine, answer_format, prepared.tokens, answer_prefix=answer_prefix)
    return AnswerPrompt(prepared.tokens, prepared.plan, opened)


def opened_thinking(
    engine: ChatEngine,
    answer_format: AnswerFormat,
    prompt: Sequence[int],
    *,
    answer_prefix: str = "",
) -> ThinkingOpened | None:
    """The thinking block `prompt` leaves the answer inside (Qwen3.5's template opens
    `<think>` in its generation prompt), or None: its last tokens' text, a control token by
    its spelling, before any forced start `answer_prefix`."""
    thinking = answer_format.thinking
    if thinking is None:
        return None
    target = engine.target
    tail = "".join(
        target.piece(token).decode("utf-8", errors="replace") or target.token_text(token)
        for token in prompt[-THINKING_TAIL_TOKENS:]
    )
    tail = tail.removesuffix(answer_prefix)
    part = thinking.prompt_part(tail)
    if not part:
        return None
    closed = any(end in part[len(thinking.start) :] for end in thinking.ends)
    return ThinkingOpened(thinking.start, part, open=not closed)
