"""Drafting goes on inside a tool call's markup and arguments, and the API counts the tokens
written inside calls and the drafts kept there (`specchat.tool_call_tokens`), which the
agent bench reports per turn."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from specchat.engine.llamacpp.prefix_cache import PrefixCache
from specchat.serve.server import ApiServer
from tests.helpers.api_server import running_server
from tests.serve.test_tool_calls import ASK, GET_TIME, NAMED


@pytest.fixture(scope="module")
def self_drafting(tools_target: Path) -> Iterator[ApiServer]:
    """The tools target drafted by itself: every draft token is kept, inside calls too."""
    with running_server(tools_target, tools_target, prefixes=PrefixCache()) as server:
        yield server


def _ask(server: ApiServer, **more: Any) -> Any:
    assert server.address is not None
    api = openai.OpenAI(base_url=server.address.base_url, api_key="unused", max_retries=0)
    return api.chat.completions.create(
        model="m", messages=ASK, temperature=0, max_tokens=16, **more
    )


def test_a_forced_call_is_drafted_and_its_kept_drafts_counted(self_drafting: ApiServer) -> None:
    answer = _ask(
        self_drafting,
        tools=[GET_TIME],
        tool_choice=NAMED,
        extra_body={"speculative": {"mode": "draft", "k": 4}},
    )
    assert answer.usage is not None
    figures = (answer.model_extra or {})["specchat"]["tool_call_tokens"]
    timings = (answer.model_extra or {})["timings"]
    # The forced opening puts the whole answer inside the call.
    assert figures["written"] == answer.usage.completion_tokens == 16
    assert figures["kept"] == timings["draft_n_accepted"] >= 8


def test_an_answer_without_tools_counts_no_call_tokens(self_drafting: ApiServer) -> None:
    answer = _ask(self_drafting, extra_body={"speculative": {"mode": "draft", "k": 4}})
    assert "tool_call_tokens" not in (answer.model_extra or {})["specchat"]
