"""Prefix reuse across API requests, counted in tokens evaluated (never seconds)."""

from __future__ import annotations

from typing import Any

from specchat.serve.server import ApiServer
from specchat.tinymodels import TinyModels
from tests.helpers.api_server import engine_thread, request, running_server

CHAT = "/v1/chat/completions"
SYSTEM_A = "You review code. " + "Here is the file:\n" + "def f(x):\n    return x + 1\n" * 12
SYSTEM_B = "You write poems about the sea. " * 12


def _ask(server: ApiServer, messages: list[dict[str, str]]) -> dict[str, Any]:
    assert server.address is not None
    body = {
        "model": "m",
        "messages": messages,
        "temperature": 0,
        "max_tokens": 4,
        "speculative": {"mode": "plain"},
    }
    reply = request(server.address, "POST", CHAT, body)
    assert reply.status == 200, reply.body
    return reply.json()


def _turns(system: str, n: int) -> list[dict[str, str]]:
    """A chat's n-th request: it repeats the one before, with an answer and a question more."""
    messages = [{"role": "system", "content": system}]
    for i in range(n):
        messages.append({"role": "user", "content": f"question {i}: what does f do?"})
        messages.append({"role": "assistant", "content": f"answer {i}: it adds one."})
    messages.append({"role": "user", "content": f"question {n}: what does f do?"})
    return messages


def test_a_fresh_prompt_has_nothing_cached_and_a_repeat_all_but_its_last_token(
    tiny_models: TinyModels,
) -> None:
    # As llama.cpp's server counts: the prompt's last token is read with the first round.
    messages = _turns("You name colours. " * 9, 0)
    with running_server(tiny_models.target, tiny_models.draft_close) as fresh_server:
        fresh = _ask(fresh_server, messages)
        again = _ask(fresh_server, messages)
    assert fresh["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert fresh["timings"]["prompt_n"] == fresh["usage"]["prompt_tokens"]
    assert again["timings"]["prompt_n"] == 1
    assert again["timings"]["cache_n"] == again["usage"]["prompt_tokens"] - 1


def test_a_follow_up_evaluates_only_its_new_tokens(server: ApiServer) -> None:
    first = _ask(server, _turns(SYSTEM_A, 0))
    second = _ask(server, _turns(SYSTEM_A, 1))
    before, after = first["usage"]["prompt_tokens"], second["usage"]["prompt_tokens"]
    timings = second["timings"]
    assert timings["cache_n"] >= before
    assert timings["prompt_n"] + timings["cache_n"] == after
    assert timings["prompt_n"] <= after - before
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] == timings["cache_n"]


def test_an_earlier_prefix_comes_back_after_another_chat(server: ApiServer) -> None:
    first = _ask(server, _turns(SYSTEM_A, 1))
    other = _ask(server, _turns(SYSTEM_B, 0))
    assert other["timings"]["cache_n"] < 16  # another chat: read almost whole
    back = _ask(server, _turns(SYSTEM_A, 2))
    timings = back["timings"]
    assert timings["cache_n"] >= first["usage"]["prompt_tokens"]
    assert timings["prompt_n"] <= back["usage"]["prompt_tokens"] - first["usage"]["prompt_tokens"]


def test_an_earlier_api_chat_joins_the_suffix_index_in_memory(server: ApiServer) -> None:
    from specchat.engine.templates.chat_template import ChatMessage
    from specchat.host.chat_call import conversation_key

    engine = engine_thread(server).engine
    assert engine is not None
    index = engine.said
    first = _turns("You count sheep. " * 5, 0)
    _ask(server, first)
    key = ("api", conversation_key([ChatMessage(m["role"], m["content"]) for m in first]))
    assert key not in index.stored()  # still this chat
    _ask(server, _turns("You count goats. " * 5, 0))
    assert key in index.stored()  # an earlier chat now


def test_two_clients_taking_turns_with_short_chats_each_read_only_their_new_tokens(
    server: ApiServer,
) -> None:
    # Chats under the window's 64-token floor: the prefix cache keeps them all the same.
    firsts = [_ask(server, _turns(system, 0)) for system in ("Be brief. ", "Be kind. ")]
    for first in firsts:
        assert 16 <= first["usage"]["prompt_tokens"] < 64
    for system, first in zip(("Be brief. ", "Be kind. "), firsts, strict=True):
        follow_up = _ask(server, _turns(system, 1))
        timings = follow_up["timings"]
        assert timings["cache_n"] >= first["usage"]["prompt_tokens"]
        new = follow_up["usage"]["prompt_tokens"] - first["usage"]["prompt_tokens"]
        assert timings["prompt_n"] <= new
