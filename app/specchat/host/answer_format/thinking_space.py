"""The white space around a template's thinking that llama.cpp's template analysis finds
(common/chat-diff-analyzer.cpp's `compare_reasoning_presence`), for the reader to pass it
as llama.cpp's generated parser does."""

from __future__ import annotations

import functools
import re
from dataclasses import replace

from specchat.engine.templates.chat_template import ChatTemplate
from specchat.engine.templates.guards import ChatTemplateError
from specchat.host.answer_format.thinking_splitter import ThinkingSyntax

#: llama.cpp's probe texts: a chat whose last answer has this reasoning and this content.
_USER = "U_USER_MSG Hello END_U"
_ANSWER = "A_ASST_MSG I can help END_A"
_REASONING = "REASON_PART I am thinking END_R"
#: A marker as llama.cpp's analysis reads one: `<...>` or `[...]`, and the white space
#: around it.
_BEFORE = re.compile(r"(<[^>]*>|\[[^\]]*\])(\s*)$")
_AFTER = re.compile(r"\s*(<[^>]*>|\[[^\]]*\])(\s*)")
#: Laguna's template writes `<think>\n` where its model writes `<think>`: llama.cpp's
#: analysis patches it to the bare markers (its workaround names the template by this).
_BARE_MARKERS = "laguna_glm_thinking"


def analysed(template: str, thinking: ThinkingSyntax) -> ThinkingSyntax:
    """`thinking` as llama.cpp's generated parser reads it for `template`: white space at
    the answer's start skipped, the white space the template writes after each marker passed
    where it comes (and no other trimmed)."""
    start_space, end_space = _spaces(template, thinking.start, thinking.ends[0])
    return replace(
        thinking,
        trim_reasoning=False,
        trim_answer=False,
        start_space=start_space,
        end_space=end_space,
        skip_lead=True,
    )


@functools.lru_cache(maxsize=32)
def _spaces(template: str, start: str, end: str) -> tuple[str, str]:
    """The white space after `start` and after `end` where the template writes an answer's
    reasoning between them; none where it writes no reasoning (llama.cpp then takes the
    bare markers) or is Laguna's."""
    if _BARE_MARKERS in template:
        return "", ""
    try:
        text = ChatTemplate(template).render(
            [
                {"role": "user", "content": _USER},
                {"role": "assistant", "content": _ANSWER, "reasoning_content": _REASONING},
            ],
            add_generation_prompt=False,
            extra={"enable_thinking": True},
        )
    except ChatTemplateError:
        return "", ""
    at = text.find(_REASONING)
    if at < 0:
        return "", ""
    before = _BEFORE.search(text, 0, at)
    after = _AFTER.match(text, at + len(_REASONING))
    if before is None or after is None or before.group(1) != start or after.group(1) != end:
        return "", ""
    return before.group(2), after.group(2)
