"""`specchat rpc-server`: loopback by default; any other address says plainly what it exposes;
an address it cannot listen on is said, with a failing exit."""

from __future__ import annotations

import subprocess
import sys

import pytest

from specchat.engine.llamacpp import rpc_devices
from specchat.engine.llamacpp.rpc_wire import is_loopback
from tests.helpers.rpc_servers import free_port, rpc_servers


def test_loopback_addresses_are_told_from_others() -> None:
    assert all(map(is_loopback, ("127.0.0.1", "127.3.2.1", "::1", "localhost", "[::1]")))
    assert not any(map(is_loopback, ("0.0.0.0", "192.168.1.20", "::", "box.lan")))


@pytest.mark.skipif(not rpc_devices.available(), reason="this llama.cpp has no RPC backend")
def test_another_address_is_warned_about_and_one_it_cannot_use_fails() -> None:
    # 192.0.2.1 (TEST-NET-1) is no address of this machine: the warning, then no server.
    port = str(free_port())
    run = subprocess.run(
        [sys.executable, "-m", "specchat", "rpc-server", "--host", "192.0.2.1", "--port", port],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1
    assert "anyone who can reach port" in run.stderr
    assert "could not start" in run.stderr


@pytest.mark.skipif(not rpc_devices.available(), reason="this llama.cpp has no RPC backend")
def test_a_loopback_server_offers_this_machines_cpu_without_a_warning() -> None:
    with rpc_servers(1) as (server,):
        from specchat.engine.llamacpp.rpc_wire import probe

        info = probe(server.endpoint)
        assert info.version == (7, 0, 0)
        assert len(info.memory) == 1 and info.free_bytes > 0
