"""The thinking opening read once for the window and the API: the prompt's last tokens'
text, a control token by its spelling, before any forced start."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from specchat.host.answer_format.formats import THINK_TO_CALL, format_of
from specchat.host.answer_format.reader import AnswerReader
from specchat.host.answer_format.thinking_splitter import ThinkingSyntax
from specchat.host.answer_prompt import ThinkingOpened, opened_thinking


def _engine(pieces: Sequence[str], control: dict[int, str] | None = None) -> Any:
    """An engine whose prompt tokens are `pieces` in order; `control` tokens render as
    nothing and are spelt by the vocabulary."""
    control = control or {}
    target = SimpleNamespace(
        piece=lambda t: b"" if t in control else pieces[t].encode(),
        token_text=lambda t: control.get(t, ""),
    )
    return SimpleNamespace(target=target)


def _opened(
    syntax: ThinkingSyntax | None, pieces: Sequence[str], **kwargs: Any
) -> ThinkingOpened | None:
    engine = _engine(pieces, kwargs.pop("control", None))
    answer_format: Any = SimpleNamespace(thinking=syntax)
    return opened_thinking(engine, answer_format, range(len(pieces)), **kwargs)


def test_a_prompt_that_opens_thinking_leaves_the_answer_inside_it() -> None:
    pieces = ["<|im_start|>", "assistant", "\n", "<think>", "\n"]
    assert _opened(THINK_TO_CALL, pieces) == ThinkingOpened("<think>", "<think>\n", open=True)
    # closed in the prompt (thinking off): read first by the reader, but the answer is no
    # thinking
    closed = [*pieces, "\n", "</think>", "\n\n"]
    assert _opened(THINK_TO_CALL, closed) == ThinkingOpened(
        "<think>", "<think>\n\n</think>\n\n", open=False
    )
    earlier = [*closed, "The answer.", "<|im_end|>", "<|im_start|>", "assistant", "\n"]
    assert _opened(THINK_TO_CALL, earlier) is None  # an earlier turn's block
    assert _opened(None, pieces) is None  # a format that writes no thinking


def test_a_control_token_is_read_by_its_spelling_and_a_forced_start_is_not_read() -> None:
    pieces = ["assistant", "\n", "", "\n", '<tool_call>\n{"name": "f"']
    opened = _opened(THINK_TO_CALL, pieces, control={2: "<think>"}, answer_prefix=pieces[-1])
    assert opened == ThinkingOpened("<think>", "<think>\n", open=True)


def test_the_answer_is_read_from_the_prompts_thinking_on() -> None:
    """The window's and the API's reader start where the prompt left the thinking: open,
    the answer's first tokens are thinking; closed, they are the reply."""
    qwen = format_of("<think></think>{{ messages }}")
    assert qwen.thinking is not None and qwen.thinking.start == "<think>"
    opened = AnswerReader(qwen, thinking_prompt="<think>\n")
    assert [opened.read_token(t).thinking for t in ("a", "</think>", "b")] == [True, True, False]
    closed = AnswerReader(qwen, thinking_prompt="<think>\n\n</think>\n\n")
    assert [closed.read_token(t).thinking for t in ("a", "b")] == [False, False]
