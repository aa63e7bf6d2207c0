"""What the engine host tells about API jobs: each one's start, rounds and end, and its queue."""

from __future__ import annotations

from dataclasses import dataclass

from specchat.engine.types import RoundResult


@dataclass(frozen=True)
class ApiStarted:
    """An API request began (its prompt is being read).

    Attributes:
        job_id: the job's number in this run.
        label: the request's number and client ("#3 from 127.0.0.1").
        question: its last user message, or the tool results the chat ends with.
    """

    job_id: int
    label: str
    question: str


@dataclass(frozen=True)
class ApiRound:
    """One round of an API request's answer.

    Attributes:
        job_id: the job's number.
        result: the round.
        thinking: each event's thinking tag as the answer's reader read it (TokenRead.tag);
            () where it is not read.
    """

    job_id: int
    result: RoundResult
    thinking: tuple[str, ...] = ()


@dataclass(frozen=True)
class ApiEnded:
    """An API request ended.

    Attributes:
        job_id: the job's number.
        note: how it ended, for people ("62 tokens, eos" or the error).
    """

    job_id: int
    note: str


@dataclass(frozen=True)
class ApiQueue:
    """The host's queue of API requests.

    Attributes:
        waiting: requests waiting their turn.
        busy: whether one is being answered.
    """

    waiting: int
    busy: bool


#: Every event a host's listener is told.
HostEvent = ApiStarted | ApiRound | ApiEnded | ApiQueue
