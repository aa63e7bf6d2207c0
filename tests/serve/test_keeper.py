"""API chats are kept in the conversation store only when the user asks for it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specchat import settings
from specchat.commands.serve import _keeper
from specchat.host.keeper import ChatKeeper
from specchat.serve.server import ApiServer
from specchat.store.conversations import ConversationStore
from tests.helpers.api_server import engine_thread, request

CHAT = "/v1/chat/completions"


def _ask(server: ApiServer, messages: list[Any], **extra: Any) -> dict[str, Any]:
    assert server.address is not None
    body = {"messages": messages, "temperature": 0, "max_tokens": 6, **extra}
    reply = request(server.address, "POST", CHAT, body)
    assert reply.status == 200
    return reply.json()


def test_api_chats_are_not_stored_by_default() -> None:
    assert settings.REMEMBER_API_CHATS.default is False
    assert _keeper() is None


def test_a_kept_chat_is_one_conversation_growing_turn_by_turn(
    server: ApiServer, tmp_path: Path
) -> None:
    store = ConversationStore(tmp_path / "chats.sqlite3")
    runner = engine_thread(server).runner
    runner.keeper = ChatKeeper(store)
    try:
        first = [{"role": "user", "content": "what is a monad?"}]
        answer = _ask(server, first)["choices"][0]["message"]["content"]
        second = [*first, {"role": "assistant", "content": answer}]
        second.append({"role": "user", "content": "shorter, please"})
        again = _ask(server, second)["choices"][0]["message"]["content"]
        _ask(server, [{"role": "user", "content": "another chat"}])
    finally:
        runner.keeper = None
    chats = store.conversations()
    assert sorted(c.title for c in chats) == ["API: another chat", "API: what is a monad?"]
    monad = next(c for c in chats if "monad" in c.title)
    said = [(m.role, m.content) for m in store.messages(monad.id)]
    assert said == [
        ("user", "what is a monad?"),
        ("assistant", answer),
        ("user", "shorter, please"),
        ("assistant", again),
    ]
    store.close()


def test_a_kept_tool_chat_shows_its_calls_and_results_in_words(
    tools_server: ApiServer, tmp_path: Path
) -> None:
    store = ConversationStore(tmp_path / "chats.sqlite3")
    runner = engine_thread(tools_server).runner
    runner.keeper = ChatKeeper(store)
    tool = {"type": "function", "function": {"name": "get_time", "parameters": {}}}
    named = {"type": "function", "function": {"name": "get_time"}}
    asked: list[Any] = [{"role": "user", "content": "what time is it?"}]
    try:
        first = _ask(tools_server, asked, tools=[tool], tool_choice=named)
        said = first["choices"][0]["message"]
        (call,) = said["tool_calls"]
        result = {
            "role": "tool",
            "tool_call_id": call["id"],
            "name": "get_time",
            "content": "14:05",
        }
        _ask(tools_server, [*asked, said, result], tools=[tool])
    finally:
        runner.keeper = None
    (chat,) = store.conversations()
    kept = [(m.role, m.content) for m in store.messages(chat.id)]
    arguments = call["function"]["arguments"]
    assert kept[:3] == [
        ("user", "what time is it?"),
        ("assistant", f"Called get_time({arguments})"),
        ("user", "Result of get_time:\n14:05"),
    ]
    assert [role for role, _ in kept] == ["user", "assistant", "user", "assistant"]
    store.close()
