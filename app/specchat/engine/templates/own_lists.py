"""Lists a template builds itself, which it may append to and pop from (llama.cpp's Jinja's)."""

from __future__ import annotations

from typing import Any


class OwnList(list[Any]):
    """A list the template built: a literal, a filter's result, a slice or a sum of lists.

    Always a new list, never one of the chat's: what the template was given (messages,
    tools and all they hold) stays as immutable as Jinja's immutable sandbox makes it.
    """

    __slots__ = ()


#: What a template may call on its own list: llama.cpp's Jinja gives arrays `append` and
#: `pop` (Kimi K2 queues call ids with them); its sort and reverse build new lists.
METHODS = frozenset({"append", "pop"})


def owned(value: Any) -> Any:
    """`value` as the template's own list when it is a plain list just built, else as it is."""
    return OwnList(value) if type(value) is list else value
