"""Download and check progress in the terminal: a redrawn bar on a TTY, sparse lines elsewhere."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class TerminalProgress:
    """Renders DownloadProgress as a redrawn bar on a TTY, as sparse plain lines elsewhere.

    Attributes:
        stream: where to write.
        tty: whether `stream` is a terminal.
    """

    def __init__(self, stream: TextIO | None = None, *, role: str = "") -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.role = role
        self._last_line = 0.0
        self._last_key: tuple[str, str] | None = None
        self._drawn = False

    def __call__(self, event: object) -> None:
        from specchat.models.transfer import DownloadProgress, format_bytes

        if not isinstance(event, DownloadProgress):
            return
        fraction = event.fraction
        amount = format_bytes(event.done)
        if event.total:
            amount += f" / {format_bytes(event.total)}"
        speed = f"{format_bytes(event.speed)}/s" if event.speed else ""
        eta = "" if event.eta is None or event.finished else f"ETA {_duration(event.eta)}"
        head = f"{self.role:<6} {event.stage:<8}"
        if self.tty:
            width = 24
            filled = int(width * (fraction or 0))
            bar = "#" * filled + "-" * (width - filled)
            percent = f"{fraction * 100:3.0f}%" if fraction is not None else " ?? "
            line = f"\r{head} [{bar}] {percent} {amount} {speed} {eta}"
            self.stream.write(line.ljust(100)[:110])
            self._drawn = True
            if event.finished:
                self.stream.write("\n")
                self._drawn = False
            self.stream.flush()
            return
        # Not a terminal (CI logs, make): a line when a stage starts, every few seconds, and
        # when it finishes; never a carriage-return storm.
        key = (event.label, event.stage)
        now = time.monotonic()
        if key != self._last_key or event.finished or now - self._last_line >= 5.0:
            percent = f" {fraction * 100:.0f}%" if fraction is not None else ""
            parts = [f"{head} {event.label}{percent}", amount, speed, eta]
            print("  ".join(part for part in parts if part), file=self.stream, flush=True)
            self._last_line = now
            self._last_key = key

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"
