"""API chats are kept in the conversation store only when the user asks for it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specchat import settings
from specchat.commands.serve import _keeper
from specchat.serve.keeper import ChatKeeper
from specchat.serve.server import ApiServer
from specchat.store.conversations import ConversationStore
from tests.helpers.api_server import engine_thread, request

CHAT = "/v1/chat/completions"


def _ask(server: ApiServer, messages: list[dict[str, str]]) -> dict[str, Any]:
    assert server.address is not None
    body = {"messages": messages, "temperature": 0, "max_tokens": 6}
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
