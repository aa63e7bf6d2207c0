"""The CPU backend's worker threads, let go by a thread that is done computing.

llama.cpp's CPU backend computes with OpenMP where it was built with it (Linux): every thread
that ran a pass keeps a team of worker threads for its next one. libgomp counts the workers of
every team in the process, and once they outnumber the cores it all but stops spin-waiting at
the barriers between a pass's operations: from then on every pass, on every thread, sleeps
and wakes at each barrier (docs/costs.md, "One thread's idle workers slow another's
passes"). So a thread that answered, or measured a file, lets its team go when it is done;
its next pass starts a new one, which costs the start of one thread.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from collections.abc import Callable, Iterator

#: The OpenMP runtimes llama.cpp may be built against, by their file names.
_RUNTIMES = ("libgomp.so.1", "libomp.so", "libomp.so.5", "libiomp5.so", "libomp.dylib")
#: omp_pause_resource_t's omp_pause_soft: the threads go, the settings stay.
_OMP_PAUSE_SOFT = 1


_found: list[Callable[[int], int]] = []


def _pause_all() -> Callable[[int], int] | None:
    """`omp_pause_resource_all` of the OpenMP runtime already loaded, or None where none is
    (a build without OpenMP, one whose CPU backend is not loaded yet, or Windows, where a
    library cannot be looked up without loading it)."""
    if _found:
        return _found[0]
    no_load = getattr(os, "RTLD_NOLOAD", None)
    if no_load is None or sys.platform == "win32":
        return None
    for name in _RUNTIMES:
        try:
            runtime = ctypes.CDLL(name, mode=no_load | os.RTLD_LAZY)
        except OSError:
            continue  # not loaded in this process
        pause = getattr(runtime, "omp_pause_resource_all", None)
        if pause is not None:
            pause.argtypes = [ctypes.c_int]
            pause.restype = ctypes.c_int
            _found.append(pause)
            return pause  # type: ignore[no-any-return]
    return None


def openmp_loaded() -> bool:
    """Whether this process computes with an OpenMP runtime whose teams can be let go."""
    return _pause_all() is not None


def release_workers() -> None:
    """Let the calling thread's OpenMP workers go (nothing where there is no OpenMP); never
    call it from inside a pass."""
    pause = _pause_all()
    if pause is not None:
        pause(_OMP_PAUSE_SOFT)


@contextlib.contextmanager
def workers_released() -> Iterator[None]:
    """Compute inside the block; the calling thread's workers go when it ends, however."""
    try:
        yield
    finally:
        release_workers()
