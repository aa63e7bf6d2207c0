"""Processes a command starts for its work (the bench's loopback RPC servers, its peer
servers) end with it.

Left running, an rpc-server keeps its port and the target's layers it was sent, a peer
server its model, long after the bench that started them is gone. So a command that is
terminated or hung up on (`kill`, `timeout`, a closed terminal) kills its children first
and then ends as it would have; and a child that is SpecChat itself also ends on its own
when its parent dies by a signal nobody can handle (SIGKILL, the out-of-memory killer).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from types import FrameType
from typing import Any

#: Set in the environment of a SpecChat process a command starts: that command's process
#: id, which the child watches (see follow_parent).
PARENT_ENV = "SPECCHAT_PARENT_PID"

#: How often a child looks whether its parent is still there.
PARENT_POLL_S = 0.5

#: Signals that end a command, after its children.
_ENDING = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))

_running: list[subprocess.Popen[Any]] = []
# Re-entrant: the signal handler runs on the main thread, maybe while it holds the lock.
_lock = threading.RLock()
_previous: dict[int, Any] = {}


def start(
    command: Sequence[str],
    *,
    own: bool = False,
    env: Mapping[str, str] | None = None,
    **options: Any,
) -> subprocess.Popen[Any]:
    """`subprocess.Popen(command, env=env, **options)`, stopped with this process. `own`: the
    command is SpecChat's own program (own_program.py), which then also ends by itself
    should this process die unseen."""
    if own:
        env = {**(os.environ if env is None else env), PARENT_ENV: str(os.getpid())}
    _watch_ending_signals()
    process = subprocess.Popen(list(command), env=None if env is None else dict(env), **options)
    with _lock:
        _running.append(process)
    return process


def forget(process: subprocess.Popen[Any]) -> None:
    """Its owner has stopped `process`: nothing is left to do for it."""
    with _lock:
        if process in _running:
            _running.remove(process)


def stop_all() -> None:
    """Kill every child still running, and reap it."""
    with _lock:
        processes = list(_running)
        _running.clear()
    for process in processes:
        if process.poll() is None:
            process.kill()
    for process in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)


def running() -> list[subprocess.Popen[Any]]:
    """The children started and not yet forgotten."""
    with _lock:
        return list(_running)


def _watch_ending_signals() -> None:
    """Handle SIGTERM and SIGHUP from now on (Python lets only the main thread install a
    handler): a signal ignored stays ignored (under `nohup` a hang-up ends nothing), and a
    handler already there runs after the children are stopped."""
    if threading.current_thread() is not threading.main_thread():
        return
    for number in _ENDING:
        if number in _previous:
            continue
        current = signal.getsignal(number)
        if current is signal.SIG_IGN or current is None:
            continue
        _previous[number] = current
        signal.signal(number, _ending)


def _ending(number: int, frame: FrameType | None) -> None:
    stop_all()
    previous = _previous.get(number)
    if callable(previous):
        previous(number, frame)
        return
    # End as the signal would have ended this process without the handler.
    signal.signal(number, signal.SIG_DFL)
    os.kill(os.getpid(), number)


def follow_parent() -> None:
    """In a SpecChat process started with `start(own=True)`: end when that parent is gone.

    Where the system gives an orphan to another parent (Linux, macOS) the child's parent id
    changes when its parent dies; the parent's own id is also checked, for a parent that is
    not the direct one (a one-file bundle unpacks itself in a process in between)."""
    value = os.environ.pop(PARENT_ENV, None)
    if value is None or os.name != "posix":
        return
    try:
        parent = int(value)
    except ValueError:
        return
    first = os.getppid()

    def parent_alive() -> bool:
        if os.getppid() != first:
            return False
        try:
            os.kill(parent, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # there, and another user's
        return True

    def watch() -> None:
        while parent_alive():
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="follow-parent", daemon=True).start()
