"""The servers a bench starts end with it: killed first when it is terminated, ending by
themselves when it is killed outright, and left alone by a hang-up it ignores (`nohup`).

Each test runs a real parent process (the bench's own code starting real `specchat
rpc-server`s, or a plain child) and signals it as `kill`, `timeout` or a closed terminal
would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specchat.engine.llamacpp import rpc_devices

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/stat").exists(), reason="reads process states from /proc (Linux)"
)

#: A parent that starts the bench's two loopback rpc-servers, says their process ids and
#: waits to be signalled.
_BENCH_PARENT = """
import sys, time
from specchat import child_processes
from specchat.commands.bench_rpc import loopback_servers
with loopback_servers(2):
    print(" ".join(str(p.pid) for p in child_processes.running()), flush=True)
    time.sleep(600)
"""

#: A parent under `nohup` (hang-ups ignored) with one plain child.
_NOHUP_PARENT = """
import signal, sys, time
signal.signal(signal.SIGHUP, signal.SIG_IGN)
from specchat import child_processes
child = child_processes.start([sys.executable, "-c", "import time; time.sleep(600)"])
print(child.pid, flush=True)
time.sleep(600)
"""


def _gone(pid: int) -> bool:
    """Whether `pid` has ended (a zombie waiting to be reaped has)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def _wait_gone(pids: list[int], timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(map(_gone, pids)):
            return True
        time.sleep(0.1)
    return False


def _start_parent(script: str) -> tuple[subprocess.Popen[str], list[int]]:
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    line = parent.stdout.readline()
    if not line:
        parent.wait(timeout=30)
        pytest.fail(f"the parent did not start its children: {parent.stderr.read()[-2000:]}")
    pids = [int(pid) for pid in line.split()]
    if not pids or any(map(_gone, pids)):
        _cleanup(parent, pids)
        pytest.fail(f"the parent named no running children: {line!r}")
    return parent, pids


def _cleanup(parent: subprocess.Popen[str], pids: list[int]) -> None:
    for pid in [parent.pid, *pids]:
        if not _gone(pid):
            os.kill(pid, signal.SIGKILL)
    parent.wait(timeout=30)


needs_rpc = pytest.mark.skipif(
    not rpc_devices.available(), reason="this llama.cpp has no RPC backend"
)


@needs_rpc
@pytest.mark.parametrize(
    "ending",
    [
        # Terminated (`kill`, `timeout`): it stops them, then ends as SIGTERM ends a process.
        signal.SIGTERM,
        # Killed outright (SIGKILL, the out-of-memory killer): they end by themselves.
        signal.SIGKILL,
    ],
    ids=["terminated", "killed"],
)
def test_loopback_servers_end_with_the_bench(ending: signal.Signals) -> None:
    parent, servers = _start_parent(_BENCH_PARENT)
    try:
        parent.send_signal(ending)
        assert parent.wait(timeout=30) == -ending
        assert _wait_gone(servers), f"an rpc-server outlived the bench ({ending.name})"
    finally:
        _cleanup(parent, servers)


def test_a_hang_up_ignored_under_nohup_ends_nothing() -> None:
    parent, (child,) = _start_parent(_NOHUP_PARENT)
    try:
        parent.send_signal(signal.SIGHUP)
        time.sleep(1.0)
        assert parent.poll() is None and not _gone(child)
        # Terminated, it still takes its child with it (a plain program: no watch of its own).
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(timeout=30) == -signal.SIGTERM
        assert _wait_gone([child])
    finally:
        _cleanup(parent, [child])
