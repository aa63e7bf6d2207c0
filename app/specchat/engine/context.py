"""Context planning: prefix reuse across turns and the overflow policy for long conversations."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from specchat.engine.attachments import AttachedMessage
from specchat.engine.templates.chat_template import ChatMessage

# --- prefix reuse across turns -----------------------------------------------------------------


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """Number of leading tokens `a` and `b` share."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


@dataclass(frozen=True)
class PrefixReuse:
    """How much of a cached prompt the next prompt can keep.

    Attributes:
        keep: cached tokens whose KV entries stay; the cache is cut back to this length.
        evaluate: the tokens that still have to be decoded.
    """

    keep: int
    evaluate: tuple[int, ...]


def plan_prefix_reuse(cached: Sequence[int], prompt: Sequence[int]) -> PrefixReuse:
    """Keep the common prefix, but always re-evaluate at least the prompt's last token.

    The next token's logits come from decoding the last prompt token, so a prompt that is
    entirely cached still needs that one token decoded again.
    """
    keep = common_prefix_len(cached, prompt)
    if prompt and keep >= len(prompt):
        keep = len(prompt) - 1
    return PrefixReuse(keep=keep, evaluate=tuple(prompt[keep:]))


# --- context overflow ------------------------------------------------------------------------


class OverflowPolicy(enum.Enum):
    """What to do when a conversation no longer fits the context (setting chat.context_overflow)."""

    #: Drop whole oldest turns, keeping the system prompt and the latest user turn.
    DROP_OLDEST = enum.auto()
    #: Do not generate; tell the user the conversation is too long.
    REFUSE = enum.auto()

    @classmethod
    def from_setting(cls, value: str) -> OverflowPolicy:
        try:
            return cls[value.strip().upper()]
        except KeyError:
            raise ValueError(
                f"unknown context overflow policy {value!r} (use drop_oldest or refuse)"
            ) from None


class ContextOverflowError(Exception):
    """The conversation does not fit the context window; the message is meant for the user.

    Attributes:
        needed: tokens the kept messages need.
        budget: tokens available.
    """

    def __init__(self, message: str, *, needed: int, budget: int) -> None:
        super().__init__(message)
        self.needed = needed
        self.budget = budget


def _conversation_too_long(needed: int, budget: int) -> ContextOverflowError:
    """Refused: the whole conversation does not fit (dropping turns was not allowed)."""
    return ContextOverflowError(
        f"this conversation needs {needed:,} tokens but the context holds {budget:,}; "
        "start a new conversation or allow dropping old turns",
        needed=needed,
        budget=budget,
    )


def _essentials_too_long(needed: int, budget: int, *, attached: int = 0) -> ContextOverflowError:
    """Even the system prompt and the latest user turn alone do not fit (`attached`: tokens of
    that turn's attachments)."""
    share = f" ({attached:,} of them its attachments)" if attached else ""
    advice = "remove an attachment or shorten the message" if attached else "shorten the message"
    return ContextOverflowError(
        f"the system prompt and the latest message alone need {needed:,} tokens{share} but the "
        f"context holds {budget:,}; {advice}",
        needed=needed,
        budget=budget,
    )


@dataclass(frozen=True)
class ContextPlan:
    """Which messages go into the prompt.

    Attributes:
        kept: indices of the messages to render, in order.
        dropped: indices of the messages left out, oldest first (to tell the user).
        tokens: tokens the kept messages need, as counted.
    """

    kept: tuple[int, ...]
    dropped: tuple[int, ...]
    tokens: int

    @property
    def truncated(self) -> bool:
        return bool(self.dropped)


def _turns(roles: Sequence[str]) -> tuple[range, list[range], range]:
    """Split message indices into pinned head (leading system), droppable turns, pinned tail."""
    n = len(roles)
    head = 0
    while head < n and roles[head] == "system":
        head += 1
    users = [i for i in range(head, n) if roles[i] == "user"]
    tail_start = users[-1] if users else max(head, n - 1)
    # A turn runs from one user message to the next, so assistant and tool replies leave
    # together with the question they answer and roles keep alternating for the template.
    starts = [head, *[u for u in users if head < u < tail_start]]
    turns = [range(a, b) for a, b in zip(starts, [*starts[1:], tail_start], strict=True) if a < b]
    return range(head), turns, range(tail_start, n)


def plan_context(
    token_counts: Sequence[int],
    roles: Sequence[str],
    *,
    budget: int,
    policy: OverflowPolicy = OverflowPolicy.DROP_OLDEST,
) -> ContextPlan:
    """Choose the messages that fit `budget` tokens, given each message's rendered token count.

    Raises ContextOverflowError under REFUSE when they do not all fit, and under either policy
    when even the system prompt and the latest user turn alone do not fit.
    """
    if len(token_counts) != len(roles):
        raise ValueError("token_counts and roles differ in length")
    total = sum(token_counts)
    everything = tuple(range(len(roles)))
    if total <= budget:
        return ContextPlan(kept=everything, dropped=(), tokens=total)
    if policy is OverflowPolicy.REFUSE:
        raise _conversation_too_long(total, budget)
    _head, turns, _tail = _turns(roles)
    dropped: list[int] = []
    for turn in turns:
        if total <= budget:
            break
        dropped.extend(turn)
        total -= sum(token_counts[i] for i in turn)
    if total > budget:
        raise _essentials_too_long(total, budget)
    gone = set(dropped)
    kept = tuple(i for i in everything if i not in gone)
    return ContextPlan(kept=kept, dropped=tuple(dropped), tokens=total)


def fit_messages(
    messages: Sequence[ChatMessage],
    *,
    budget: int,
    count_tokens: Callable[[Sequence[ChatMessage]], int],
    policy: OverflowPolicy = OverflowPolicy.DROP_OLDEST,
) -> tuple[list[ChatMessage], ContextPlan]:
    """Like plan_context, but measuring whole rendered prompts with `count_tokens`.

    A template adds its own tokens around each message, so per-message counts are only an
    estimate; this drops the fewest oldest turns (found by bisection) whose rendered prompt
    really fits.
    """
    _head, turns, _tail = _turns([m.role for m in messages])

    def keep_after(dropped_turns: int) -> list[int]:
        gone = {i for turn in turns[:dropped_turns] for i in turn}
        return [i for i in range(len(messages)) if i not in gone]

    def cost(indices: list[int]) -> int:
        return count_tokens([messages[i] for i in indices])

    total = cost(keep_after(0))
    if total <= budget:
        return list(messages), ContextPlan(tuple(range(len(messages))), (), total)
    if policy is OverflowPolicy.REFUSE:
        raise _conversation_too_long(total, budget)
    minimal = cost(keep_after(len(turns)))
    if minimal > budget:
        essentials = [messages[i] for i in keep_after(len(turns))]
        bare = [_bare(m) for m in essentials]
        attached = minimal - count_tokens(bare) if bare != essentials else 0
        raise _essentials_too_long(minimal, budget, attached=attached)
    low, high = 1, len(turns)  # invariant: dropping `high` turns fits, dropping low-1 does not
    while low < high:
        middle = (low + high) // 2
        if cost(keep_after(middle)) <= budget:
            high = middle
        else:
            low = middle + 1
    kept = keep_after(high)
    gone = tuple(i for turn in turns[:high] for i in turn)
    plan = ContextPlan(kept=tuple(kept), dropped=gone, tokens=cost(kept))
    return [messages[i] for i in kept], plan


def _bare(message: ChatMessage) -> ChatMessage:
    """The message without its attachments (itself when it has none)."""
    return message.bare() if isinstance(message, AttachedMessage) else message
