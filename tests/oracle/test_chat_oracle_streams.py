"""The recorded streams of llama.cpp's parses add up to its whole parse.

Each parse fixture's stream holds the diffs llama.cpp's server would send (the message of
each prefix against the last one, common_chat_msg_diff); applied in order as test-chat.cpp
applies them, they give the message of the whole output. SpecChat's streamed deltas are
held to these streams; this holds the streams themselves (no llama.cpp needed)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers.chat_oracle import FIXTURES, load_json


def _cases() -> list[tuple[str, dict[str, Any]]]:
    cases = []
    for path in sorted((FIXTURES / "parse").glob("*.json")):
        for case in load_json(path)["cases"]:
            if "message" in case and not any("error" in step for step in case["stream"]):
                cases.append((f"{path.stem}/{case['case']}/{case['enable_thinking']}", case))
    return cases


def _accumulate(stream: list[dict[str, Any]]) -> dict[str, Any]:
    message: dict[str, Any] = {"content": "", "reasoning_content": "", "tool_calls": []}
    for step in stream:
        for diff in step["diffs"]:
            message["content"] += diff.get("content_delta", "")
            message["reasoning_content"] += diff.get("reasoning_content_delta", "")
            if "tool_call_index" not in diff:
                continue
            calls = message["tool_calls"]
            while len(calls) <= diff["tool_call_index"]:
                calls.append({"id": "", "name": "", "arguments": ""})
            call, delta = calls[diff["tool_call_index"]], diff["tool_call_delta"]
            call["name"] = delta.get("name") or call["name"]
            call["id"] = delta.get("id") or call["id"]
            call["arguments"] += delta.get("arguments", "")
    return message


CASES = _cases()


def test_most_streams_parse_at_every_step() -> None:
    assert len(CASES) >= 250


@pytest.mark.parametrize("case", [c for _, c in CASES], ids=[name for name, _ in CASES])
def test_stream_adds_up_to_the_whole_parse(case: dict[str, Any]) -> None:
    ends = [step["end"] for step in case["stream"]]  # steps without a diff left out
    assert ends == sorted(ends) and all(end <= len(case["output"]) for end in ends)
    assert _accumulate(case["stream"]) == case["message"]
