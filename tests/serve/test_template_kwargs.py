"""`chat_template_kwargs`, as llama-server takes it: the template's own variables."""

from __future__ import annotations

from typing import Any

import pytest

from specchat.host.errors import ApiError
from specchat.serve.parsing import parse_chat_call

MESSAGES = [{"role": "user", "content": "hi"}]


def _call(**fields: Any) -> Any:
    return parse_chat_call({"messages": MESSAGES, **fields}, modes=("auto",), n_ctx=4096)


def test_template_kwargs_are_taken_as_given() -> None:
    kwargs = {"enable_thinking": False, "reasoning_effort": "low", "nested": {"a": [1]}}
    assert _call(chat_template_kwargs=kwargs).template_kwargs == kwargs


@pytest.mark.parametrize("empty", [None, {}])
def test_no_template_kwargs_is_none(empty: Any) -> None:
    assert _call(chat_template_kwargs=empty).template_kwargs is None


@pytest.mark.parametrize("wrong", [["enable_thinking"], "enable_thinking=false", 1])
def test_template_kwargs_must_be_an_object(wrong: Any) -> None:
    with pytest.raises(ApiError) as caught:
        _call(chat_template_kwargs=wrong)
    assert "chat_template_kwargs" in str(caught.value.message)


def test_earlier_thinking_is_kept_for_the_template() -> None:
    answer = {"role": "assistant", "content": "4.", "reasoning_content": "2+2=4"}
    call = parse_chat_call(
        {"messages": [*MESSAGES, answer, *MESSAGES]}, modes=("auto",), n_ctx=4096
    )
    assert call.messages[1].reasoning_content == "2+2=4"
