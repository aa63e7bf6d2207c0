"""Workarounds for Qt binding bugs, installed once by the Qt layers (workers/, ui/)."""

from __future__ import annotations

import ctypes
import sys

#: Added to the reference counts of None, True and False when the binding leaks them: at
#: one lost reference per call, 2**40 calls is centuries of continuous use.
_PIN = 1 << 40

_installed = False


def _lost_references() -> tuple[int, int]:
    """References to None and to True one call of each leaking kind drops (0 when sound)."""
    from PySide6.QtCore import QObject, Signal

    class _Probe(QObject):
        ping = Signal()

    probe = _Probe()
    calls = 16
    none_before, true_before = sys.getrefcount(None), sys.getrefcount(True)
    for _ in range(calls):
        probe.setObjectName("probe")  # a void method: returns None
        probe.ping.emit()  # returns True
    lost_none = none_before - sys.getrefcount(None)
    lost_true = true_before - sys.getrefcount(True)
    return max(0, lost_none), max(0, lost_true)


def leaks_singletons() -> bool:
    """Whether this PySide build drops references to None/True (see install())."""
    lost_none, lost_true = _lost_references()
    return lost_none > 0 or lost_true > 0


def install() -> None:
    """Make the binding's reference leaks harmless; idempotent.

    PySide6 6.12.0's abi3 wheels return Py_None from void methods (and Py_True from
    `SignalInstance.emit()`) without taking a new reference. On CPython ≥ 3.12 those objects
    are immortal and nothing happens; on 3.11 every such call drops a reference, and after
    some ten thousand calls (seconds of streaming into a QTextDocument) the interpreter
    aborts with "Fatal Python error: none_dealloc" or "bool_dealloc". CPython 3.12 made
    these singletons immortal by giving them an enormous reference count; this does the
    same on older interpreters, only when the leak is observed.
    """
    global _installed
    if _installed:
        return
    _installed = True
    if sys.version_info >= (3, 12) or not hasattr(sys, "getrefcount"):
        return
    if not leaks_singletons():
        return
    for singleton in (None, True, False):
        # ob_refcnt is the first field of every PyObject in a non-debug CPython build.
        count = ctypes.c_ssize_t.from_address(id(singleton))
        count.value += _PIN
