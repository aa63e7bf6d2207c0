"""Functionary 3.2's answers read as llama.cpp reads them (common/parsers/functionary-v3-2.cpp):
a run of messages after `>>>` (the prompt writes the first), each a recipient on its own line
and a body: `all` is text to the user, another recipient a call with its body as arguments."""

from __future__ import annotations

from specchat.host.answer_format.json_calls import Schemas
from specchat.host.answer_format.messages import Segment

#: What opens each message (the prompt ends with the first).
OPENING = ">>>"


def segments(text: str, *, final: bool, schemas: Schemas | None = None) -> list[Segment]:
    """The messages of an answer's text (the first `>>>` being the prompt's) as far as it
    says them: a recipient once its line ends, a body up to what may start the next `>>>`."""
    del schemas  # its calls' arguments are JSON as written
    out: list[Segment] = []
    for index, part in enumerate(text.split(OPENING)):
        last = index == len(text.split(OPENING)) - 1
        recipient, newline, body = part.partition("\n")
        if not newline:
            break
        if last and not final:
            body = body[: len(body) - _opening_start(body)]
        name = recipient.strip()
        out.append(Segment("content", body) if name == "all" else Segment("call", body, name))
    return out


def _opening_start(text: str) -> int:
    for size in range(min(len(OPENING) - 1, len(text)), 0, -1):
        if text.endswith(OPENING[:size]):
            return size
    return 0
