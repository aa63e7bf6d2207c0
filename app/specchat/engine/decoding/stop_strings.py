"""Stop strings: the answer ends before one, and no part of one is ever shown."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from specchat.engine.types import StopReason, TokenEvent


class StopStringFilter:
    """Ends the answer before a stop string, never showing any part of it.

    Text that could be the start of a stop string is held back until later tokens settle it,
    since a stop string may span several tokens and rounds.
    """

    def __init__(self, stop_strings: Sequence[str]) -> None:
        self.stop_strings = tuple(s for s in stop_strings if s)
        self.active = bool(self.stop_strings)
        self._held: list[TokenEvent] = []

    @property
    def held(self) -> int:
        return len(self._held)

    def filter(
        self, events: list[TokenEvent], *, final: bool
    ) -> tuple[list[TokenEvent], StopReason | None]:
        """The events safe to show now, and STOP_STRING when a stop string was found."""
        pending = self._held + events
        text = "".join(e.text for e in pending)
        hits = [i for i in (text.find(s) for s in self.stop_strings) if i >= 0]
        if hits:
            self._held = []
            return cut_events(pending, min(hits)), StopReason.STOP_STRING
        if final:
            self._held = []
            return pending, None
        keep_from = len(text) - self._longest_partial(text)
        shown: list[TokenEvent] = []
        offset = 0
        for index, event in enumerate(pending):
            if offset + len(event.text) > keep_from:
                self._held = pending[index:]
                return shown, None
            shown.append(event)
            offset += len(event.text)
        self._held = []
        return shown, None

    def _longest_partial(self, text: str) -> int:
        """Length of the longest suffix of `text` that begins some stop string."""
        best = 0
        for stop in self.stop_strings:
            for size in range(min(len(stop) - 1, len(text)), best, -1):
                if text.endswith(stop[:size]):
                    best = size
                    break
        return best


def cut_events(events: list[TokenEvent], cut: int) -> list[TokenEvent]:
    """The events whose text lies before character offset `cut`, the last one trimmed."""
    kept: list[TokenEvent] = []
    offset = 0
    for event in events:
        if offset >= cut:
            break
        if offset + len(event.text) > cut:
            event = replace(event, text=event.text[: cut - offset])
        kept.append(event)
        offset += len(event.text)
    return kept
