"""Tool results filed in the suffix index JSON-escaped, as a call's arguments quote them."""

from __future__ import annotations

from typing import Any

from specchat.engine.suffix.index import Source
from specchat.host.chat_call import conversation_key
from specchat.host.tool_copies import KEY, escaped, forget_tool_results
from specchat.serve.parsing import parse_chat_call
from specchat.serve.server import ApiServer
from tests.helpers.api_server import engine_thread, request

FILE = "def total(items):\n    return sum(item['price'] for item in items)\n"
CHAT: list[Any] = [
    {"role": "user", "content": "Rename total in shop.py."},
    {
        "role": "assistant",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "list", "arguments": "{}"}},
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": FILE},
    {"role": "tool", "tool_call_id": "c2", "content": "shop.py"},
]
TOOL = {"type": "function", "function": {"name": "read", "parameters": {}}}


def test_a_tool_result_is_filed_as_a_call_would_quote_it(tools_server: ApiServer) -> None:
    assert tools_server.address is not None
    engine = engine_thread(tools_server).engine
    assert engine is not None
    index = engine.said.index
    body = {"messages": CHAT, "tools": [TOOL], "max_tokens": 2, "temperature": 0}
    assert request(tools_server.address, "POST", "/v1/chat/completions", body).status == 200
    messages = parse_chat_call(body, modes=("auto",), n_ctx=4096).messages
    key = conversation_key(messages)
    filed = {k for k in index.stored() if isinstance(k, tuple) and k[0] == KEY}
    # The file (its line breaks escaped); not the file name, which a call writes as it is.
    assert filed == {(KEY, key, 2)}
    assert escaped(FILE) == FILE.replace("\n", "\\n")
    assert index.wait_idle(10)
    # A call that writes the file back, as far as its first escaped line break and on:
    # the rest is proposed from the escaped result.
    tokens = engine.target.tokenize(escaped(FILE), add_special=False, parse_special=False)
    index.reset_chat()
    index.prepare(engine.target.tokenize('{"content": "', parse_special=False))
    index.extend(tokens[:20])
    (found,) = index.propose(8)
    assert found.source is Source.ATTACHMENT and list(found.tokens) == tokens[20:28]
    index.reset_chat()
    forget_tool_results(engine)
    assert not {k for k in index.stored() if isinstance(k, tuple) and k[0] == KEY}
