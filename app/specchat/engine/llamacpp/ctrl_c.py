"""Ctrl-C while C code calls back into Python: held, then raised once the C call returns."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def ctrl_c_held(cleanup: Callable[[], None]) -> Iterator[None]:
    """Hold Ctrl-C while llama.cpp runs Python callbacks, and raise it when the block ends.

    A KeyboardInterrupt raised inside a ctypes callback (llama.cpp's log callback, a load's
    progress callback) is printed and dropped by ctypes, so Ctrl-C during a model load was
    lost: the command ran on. In the main thread, with Python's own Ctrl-C handler in place,
    the handler only notes the key meanwhile; `cleanup` frees what the block made before the
    KeyboardInterrupt is raised.
    """
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    pressed: list[int] = []
    signal.signal(signal.SIGINT, lambda number, _frame: pressed.append(number))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if pressed:
        cleanup()
        raise KeyboardInterrupt
