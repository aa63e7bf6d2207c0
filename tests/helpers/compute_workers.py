"""Which threads of this process Python did not start: llama.cpp's compute workers among them."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable


def native_threads() -> set[int]:
    """The ids of this process's threads that are not Python's."""
    python = {thread.native_id for thread in threading.enumerate()}
    return {int(name) for name in os.listdir("/proc/self/task")} - python


def workers_of(work: Callable[[Callable[[], None]], None]) -> tuple[set[int], set[int]]:
    """Run `work` on a thread of its own that outlives it; `work` calls the function it is
    handed while it computes. Returns the native threads that appeared by then, and those
    still there once `work` returned (its thread alive)."""
    before = native_threads()
    seen: dict[str, set[int]] = {}
    done, finish = threading.Event(), threading.Event()

    def mark() -> None:
        seen.setdefault("during", native_threads() - before)

    def run() -> None:
        try:
            work(mark)
            seen["after"] = native_threads() - before
        finally:
            done.set()
            finish.wait(60)

    thread = threading.Thread(target=run, name="computes")
    thread.start()
    try:
        assert done.wait(120), "the work did not end"
    finally:
        finish.set()
        thread.join(60)
    return seen["during"], seen["after"]
