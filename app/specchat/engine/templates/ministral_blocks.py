"""Thinking and text as typed blocks for Ministral 3's templates, as llama.cpp hands them.

Ministral 3 (and Magistral) templates read an assistant's thinking from a `thinking` block
of its content, not from `reasoning_content`. llama.cpp rewrites system and assistant
messages for them (common/parsers/ministral3.cpp): their content becomes blocks, the
thinking first. Its test catches every template with [SYSTEM_PROMPT], [TOOL_CALLS] and
[ARGS] but no [CALL_ID] (Devstral's as well), and so does this one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def needs_blocks(source: str) -> bool:
    """Whether llama.cpp takes `source` for a Ministral 3 template."""
    return (
        all(mark in source for mark in ("[SYSTEM_PROMPT]", "[TOOL_CALLS]", "[ARGS]"))
        and "[CALL_ID]" not in source
    )


def as_blocks(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` with each system and assistant message's thinking and text as blocks."""
    adjusted: list[dict[str, Any]] = []
    for message in messages:
        if message.get("role") not in ("system", "assistant"):
            adjusted.append(message)
            continue
        blocks: list[dict[str, Any]] = []
        reasoning = message.get("reasoning_content")
        if isinstance(reasoning, str):
            blocks.append({"type": "thinking", "thinking": reasoning})
        content = message.get("content")
        if isinstance(content, str):
            blocks.append({"type": "text", "text": content})
        elif isinstance(content, list):
            blocks.extend(content)
        rewritten = {key: value for key, value in message.items() if key != "reasoning_content"}
        rewritten["content"] = blocks
        adjusted.append(rewritten)
    return adjusted
