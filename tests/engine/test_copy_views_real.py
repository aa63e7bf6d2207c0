"""Copies through JSON escaping on the real default pair: a file read raw and written back
inside a call's JSON string argument, and one read as a JSON tool result and written raw,
are copied (most tokens kept) and the answer is plain decoding's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from specchat.engine.drafting.copies.views import Views
from specchat.engine.session import ChatEngine
from specchat.engine.templates.chat_message import ChatMessage, ToolCall
from specchat.engine.types import TokenKind
from tests.helpers.engine import Run, run

pytestmark = pytest.mark.real_model

FILE = (
    "def mean(values):\n"
    "    total = 0\n"
    "    count = 0\n"
    "    for value in values:\n"
    "        if value is None:\n"
    "            continue\n"
    "        total += value\n"
    "        count += 1\n"
    "    return total / count if count else 0.0\n"
)
WRITE = {
    "type": "function",
    "function": {
        "name": "write_file",
        "description": "Write a file.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
    },
}
READ = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
}
MAX_TOKENS = 100
#: The target's top-two logit gap under which a divergence counts as float noise (llama.cpp
#: computes a row slightly differently in a batch than alone), as tests/engine/test_real_pair.
NEAR_TIE = 0.1


@pytest.fixture(scope="module")
def engine(real_pair: tuple[Path, Path]) -> Iterator[ChatEngine]:
    target, draft = real_pair
    loaded = ChatEngine.load(target, draft, n_ctx=2048)
    yield loaded
    loaded.close()


def assert_plain(spec: Run, plain: Run) -> None:
    """`spec` is plain decoding's answer, or leaves it only at a near-tie."""
    if spec.tokens != plain.tokens:
        at = next(
            i for i, (a, b) in enumerate(zip(plain.tokens, spec.tokens, strict=False)) if a != b
        )
        assert plain.events[at].margin < NEAR_TIE, (at, plain.text, spec.text)


def kept(result: Run) -> int:
    return sum(1 for event in result.events if event.kind is TokenKind.ACCEPTED)


def copied(
    engine: ChatEngine, prompt: list[int], monkeypatch: pytest.MonkeyPatch
) -> tuple[Run, Run, Run]:
    """(plain, lookup with views, lookup without them), at T = 0 with a fixed K: the
    drafts do not depend on the machine's speed."""
    plain = run(engine.decoder, prompt, mode="plain", max_tokens=MAX_TOKENS)
    viewed = run(engine.decoder, prompt, mode="lookup", k=8, max_tokens=MAX_TOKENS)
    with monkeypatch.context() as patch:
        patch.setattr(Views, "find", lambda self, *args: None)
        bare = run(engine.decoder, prompt, mode="lookup", k=8, max_tokens=MAX_TOKENS)
    return plain, viewed, bare


def test_a_raw_file_is_copied_into_a_json_string_argument(
    engine: ChatEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    question = f"Here is stats.py:\n\n```python\n{FILE}```\n\nWrite it back unchanged."
    opening = '<tool_call>\n{"name": "write_file", "arguments": {"path": "stats.py", "content": "'
    prompt = engine.prepare(
        [ChatMessage("user", question)],
        max_tokens=MAX_TOKENS,
        tools=[WRITE],
        answer_prefix=opening,
    ).tokens
    plain, viewed, bare = copied(engine, prompt, monkeypatch)
    assert json.dumps(FILE)[1:40] in plain.text, plain.text  # the file, escaped
    assert_plain(viewed, plain)
    # Most of the escaped file is kept from the raw one; without the view, a copy breaks
    # at every line's end.
    assert kept(viewed) > 0.7 * len(plain.tokens), (kept(viewed), len(plain.tokens))
    assert kept(viewed) > kept(bare) + 10, (kept(viewed), kept(bare))


def test_a_json_tool_result_is_copied_raw(
    engine: ChatEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = json.dumps({"path": "stats.py", "content": FILE})
    chat = [
        ChatMessage("user", "Show me stats.py as a Python code block, unchanged."),
        ChatMessage("assistant", "", (ToolCall("c1", "read_file", '{"path": "stats.py"}'),)),
        ChatMessage("tool", result, tool_call_id="c1", name="read_file"),
    ]
    prompt = engine.prepare(
        chat, max_tokens=MAX_TOKENS, tools=[READ], answer_prefix="```python\n"
    ).tokens
    plain, viewed, bare = copied(engine, prompt, monkeypatch)
    assert FILE[:30] in plain.text, plain.text
    assert_plain(viewed, plain)
    assert kept(viewed) > 0.7 * len(plain.tokens), (kept(viewed), len(plain.tokens))
    assert kept(viewed) > kept(bare) + 10, (kept(viewed), kept(bare))
