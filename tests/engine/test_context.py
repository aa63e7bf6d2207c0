"""Context planning: prefix reuse across turns and the overflow policy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from specchat import settings as settings_module
from specchat.engine.context import (
    ContextOverflowError,
    OverflowPolicy,
    common_prefix_len,
    fit_messages,
    plan_context,
    plan_prefix_reuse,
)
from specchat.engine.templates.chat_template import ChatMessage, ChatTemplate, render_chat
from tests.helpers.chat_templates import QWEN25_TEMPLATE

CONVERSATION = [
    ChatMessage("system", "Be brief."),
    ChatMessage("user", "Hi"),
    ChatMessage("assistant", "Hello!"),
    ChatMessage("user", "2+2?"),
]


# --- prefix reuse ----------------------------------------------------------------------------


def test_common_prefix_len() -> None:
    assert common_prefix_len([], []) == 0
    assert common_prefix_len([1, 2, 3], [1, 2, 3]) == 3
    assert common_prefix_len([1, 2, 3], [1, 2, 3, 4]) == 3
    assert common_prefix_len([1, 2, 3], [1, 9, 3]) == 1
    assert common_prefix_len([5], [6]) == 0


def test_prefix_reuse_across_turns() -> None:
    turn_one = render_chat(QWEN25_TEMPLATE, CONVERSATION[:2])
    turn_two = render_chat(
        QWEN25_TEMPLATE, [*CONVERSATION[:2], ChatMessage("assistant", "Hello!"), CONVERSATION[3]]
    )
    cached = [ord(c) for c in turn_one]  # characters stand in for tokens
    prompt = [ord(c) for c in turn_two]
    reuse = plan_prefix_reuse(cached, prompt)
    # The follow-up only evaluates what is new; the earlier prompt is a strict prefix.
    assert reuse.keep == len(cached)
    assert reuse.evaluate == tuple(prompt[len(cached) :])


def test_prefix_reuse_reevaluates_last_token_of_identical_prompt() -> None:
    reuse = plan_prefix_reuse([1, 2, 3], [1, 2, 3])
    assert reuse.keep == 2
    assert reuse.evaluate == (3,)
    assert plan_prefix_reuse([1, 2, 3], [1, 7]).evaluate == (7,)
    assert plan_prefix_reuse([], []).keep == 0


# --- context overflow ------------------------------------------------------------------------

ROLES = ["system", "user", "assistant", "user", "assistant", "user", "assistant", "user"]


def test_everything_fits() -> None:
    plan = plan_context([10] * 8, ROLES, budget=80)
    assert plan.kept == tuple(range(8))
    assert plan.dropped == ()
    assert not plan.truncated


def test_drop_oldest_turns_keeps_system_and_latest_user() -> None:
    counts = [5, 10, 10, 10, 10, 10, 10, 10]
    plan = plan_context(counts, ROLES, budget=50)
    assert plan.dropped == (1, 2, 3, 4)  # two whole question/answer turns
    assert plan.kept == (0, 5, 6, 7)
    assert plan.tokens == 35
    assert plan.truncated


def test_drop_keeps_assistant_with_its_question() -> None:
    plan = plan_context([5, 10, 10, 10, 10, 10, 10, 10], ROLES, budget=60)
    assert plan.dropped == (1, 2)
    assert plan.kept == (0, 3, 4, 5, 6, 7)
    assert ROLES[plan.kept[1]] == "user"  # the conversation still opens with a question


def test_refuse_policy_raises() -> None:
    with pytest.raises(ContextOverflowError) as caught:
        plan_context([10] * 8, ROLES, budget=50, policy=OverflowPolicy.REFUSE)
    assert caught.value.needed == 80
    assert caught.value.budget == 50


def test_even_the_latest_turn_does_not_fit() -> None:
    with pytest.raises(ContextOverflowError) as caught:
        plan_context([30, 10, 10, 40], ["system", "user", "assistant", "user"], budget=60)
    assert caught.value.needed == 70
    assert "latest message" in str(caught.value)


def test_without_system_message() -> None:
    plan = plan_context([10, 10, 10, 10, 10], ROLES[1:6], budget=25)
    assert plan.kept == (4,)
    assert plan.dropped == (0, 1, 2, 3)


def test_policy_from_setting(tmp_path: Path) -> None:
    stored = settings_module.Settings(tmp_path / "settings.json")
    policy = OverflowPolicy.from_setting(stored.get(settings_module.CONTEXT_OVERFLOW))
    assert policy is OverflowPolicy.DROP_OLDEST
    assert OverflowPolicy.from_setting("refuse") is OverflowPolicy.REFUSE
    with pytest.raises(ValueError):
        OverflowPolicy.from_setting("summarise")


def test_fit_messages_measures_rendered_prompts() -> None:
    template = ChatTemplate(QWEN25_TEMPLATE)
    messages = [ChatMessage("system", "Be brief.")]
    for i in range(20):
        messages += [ChatMessage("user", f"q{i} " * 20), ChatMessage("assistant", f"a{i} " * 20)]
    messages.append(ChatMessage("user", "last question"))

    def count(chosen: Any) -> int:
        return len(template.render(chosen)) // 4

    budget = count(messages) // 3
    kept, plan = fit_messages(messages, budget=budget, count_tokens=count)
    assert count(kept) <= budget
    assert kept[0] == messages[0]
    assert kept[-1] == messages[-1]
    assert plan.tokens == count(kept)
    # Minimal: bringing back the last dropped turn would overflow.
    restored = [messages[i] for i in sorted({*plan.kept, plan.dropped[-2], plan.dropped[-1]})]
    assert count(restored) > budget
    with pytest.raises(ContextOverflowError):
        fit_messages(messages, budget=budget, count_tokens=count, policy=OverflowPolicy.REFUSE)


def test_context_planning_does_not_import_qt() -> None:
    code = "import sys, specchat.engine.context; assert 'PySide6' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
