"""What changed in the conversation store, for those keeping something in step with it."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass


class ChangeKind(enum.Enum):
    """What happened to a conversation."""

    MESSAGES = enum.auto()  #: a message was added, finished or erased
    DELETED = enum.auto()  #: moved to the bin (its text must be forgotten at once)
    RESTORED = enum.auto()  #: brought back from the bin


@dataclass(frozen=True)
class StoreChange:
    """One committed change.

    Attributes:
        conversation_id: the conversation it concerns.
        kind: what happened.
    """

    conversation_id: int
    kind: ChangeKind


Listener = Callable[[StoreChange], None]
