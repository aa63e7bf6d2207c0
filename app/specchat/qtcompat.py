"""Workarounds for Qt binding bugs, installed once by the Qt layers (workers/, ui/)."""

from __future__ import annotations

import ctypes
import sys
from typing import Any

_installed = False


def _emit_leak_per_call() -> int:
    """References to True lost per SignalInstance.emit() call (0 on a sound binding)."""
    from PySide6.QtCore import QObject, Signal

    class _Probe(QObject):
        ping = Signal()

    probe = _Probe()
    calls = 16
    before = sys.getrefcount(True)
    for _ in range(calls):
        probe.ping.emit()
    lost = before - sys.getrefcount(True)
    # Undo what the probe itself cost, so detecting the bug does not shorten True's life.
    for _ in range(max(0, lost)):
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(True))
    return max(0, round(lost / calls))


def install() -> None:
    """Patch known binding bugs; idempotent and cheap after the first call.

    PySide6 6.12.0 on CPython < 3.12: `SignalInstance.emit()` returns Py_True without taking
    a reference for it, so every emit from Python drops one reference to True. After a few
    thousand emits (a few minutes of streaming) the interpreter aborts with "Fatal Python
    error: bool_dealloc". From 3.12 on True is immortal and nothing is lost; the probe finds
    0 there and on fixed PySide releases, and then nothing is patched.
    """
    global _installed
    if _installed:
        return
    _installed = True
    leak = _emit_leak_per_call()
    if leak <= 0:
        return
    from PySide6.QtCore import SignalInstance

    original = SignalInstance.emit
    incref = ctypes.pythonapi.Py_IncRef
    incref.argtypes = [ctypes.py_object]
    incref.restype = None

    def emit(self: Any, *args: Any) -> Any:
        result = original(self, *args)
        if result is True or result is False:
            for _ in range(leak):
                incref(result)
        return result

    SignalInstance.emit = emit  # type: ignore[method-assign]
