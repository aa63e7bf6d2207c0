"""Tool results folded into the model's turn for Gemma 4's older templates, as llama.cpp does.

Gemma 4 writes a call's results inside the model turn that made it (`tool_responses`);
its first templates read them only there, not from `tool` messages. llama.cpp rewrites the
chat for those templates (common/parsers/gemma4.cpp, convert_tool_responses_gemma4):
assistant(calls) → tool results → assistant(text) becomes one assistant message.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any


def needs_folding(source: str) -> bool:
    """Whether `source` is a Gemma 4 template from before the official one (which reads
    `tool` messages itself and says so in an "OpenAI Chat Completions" comment)."""
    return "'<|tool_call>call:'" in source and "{#- OpenAI Chat Completions:" not in source


def fold_tool_responses(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """`messages` with each assistant turn that called tools joined to the results that
    follow it and to the assistant's text after them."""
    folded: list[dict[str, Any]] = []
    pos = 0
    while pos < len(messages):
        message = messages[pos]
        if message.get("role") != "assistant" or not message.get("tool_calls"):
            folded.append(message)
            pos += 1
            continue
        calls = list(message["tool_calls"])
        responses: list[dict[str, Any]] = []
        pos += 1
        while pos < len(messages) and messages[pos].get("role") == "tool":
            responses.append(_response(messages[pos], calls, len(responses)))
            pos += 1
        turn: dict[str, Any] = {"role": "assistant", "tool_calls": calls}
        if responses:
            turn["tool_responses"] = responses
        if pos < len(messages) and _is_answer(messages[pos]):
            turn["content"] = messages[pos]["content"]
            pos += 1
        if isinstance(message.get("reasoning_content"), str):
            turn["reasoning_content"] = message["reasoning_content"]
        folded.append(turn)
    return folded


def _response(result: dict[str, Any], calls: list[dict[str, Any]], index: int) -> dict[str, Any]:
    content = result.get("content")
    response: Any = content
    if isinstance(content, str):
        try:
            response = json.loads(content)
        except ValueError:
            response = content
    name = ""
    if index < len(calls):
        function = calls[index].get("function")
        if isinstance(function, dict):
            name = str(function.get("name", ""))
    return {"name": name or result.get("tool_call_id", ""), "response": response}


def _is_answer(message: dict[str, Any]) -> bool:
    return (
        message.get("role") == "assistant"
        and not message.get("tool_calls")
        and bool(message.get("content"))
    )
