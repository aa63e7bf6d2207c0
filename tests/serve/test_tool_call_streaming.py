"""A call's arguments stream as they are decoded, whatever drafts them: through `specchat
serve`, each mode's streamed call arrives in many pieces, and they join into plain
decoding's arguments at T = 0."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from specchat.serve.server import ApiServer

GET_TIME: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "The time now in a time zone.",
        "parameters": {
            "type": "object",
            "properties": {"timezone": {"type": "string"}},
            "required": ["timezone"],
        },
    },
}
MAX_TOKENS = 24


def streamed_arguments(server: ApiServer, mode: str) -> list[str]:
    """The pieces of the named call's arguments, chunk by chunk, in mode `mode`."""
    assert server.address is not None
    api = openai.OpenAI(base_url=server.address.base_url, api_key="unused", max_retries=0)
    chunks = api.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "What time is it in Tokyo?"}],
        tools=[GET_TIME],
        tool_choice={"type": "function", "function": {"name": "get_time"}},
        temperature=0,
        max_tokens=MAX_TOKENS,
        stream=True,
        extra_body={"speculative": {"mode": mode}},
    )
    pieces = []
    for chunk in chunks:
        for part in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            if part.function is not None and part.function.arguments:
                pieces.append(part.function.arguments)
    return pieces


@pytest.mark.parametrize("mode", ["lookup", "suffix", "draft", "auto"])
def test_call_arguments_stream_as_decoded_whatever_the_drafter(
    tools_server: ApiServer, mode: str
) -> None:
    plain = streamed_arguments(tools_server, "plain")
    # Plain decoding: about a piece a token (a piece held only while it may be markup).
    assert len(plain) >= MAX_TOKENS // 3, plain
    drafted = streamed_arguments(tools_server, mode)
    assert "".join(drafted) == "".join(plain)
    # A round's kept tokens come in one piece: never the whole call at its end.
    assert len(drafted) > 1, drafted
