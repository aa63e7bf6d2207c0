"""A target over RPC on a slower network (`make test-slow`): the answer unchanged, each token
waiting out the round trips. The round trip is added by SpecChat's relay, and (where this
machine allows unprivileged network namespaces with tc netem) by a namespace's own loopback,
never by a shared interface."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from specchat.engine.llamacpp import rpc_devices, rpc_relay
from specchat.tinymodels import TinyModels
from tests.helpers.rpc_round_trip import check
from tests.helpers.rpc_servers import RpcServer, rpc_servers

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not rpc_devices.available(), reason="this llama.cpp has no RPC backend"),
]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def servers() -> Iterator[Sequence[RpcServer]]:
    with rpc_servers(2) as running:
        yield running


@pytest.mark.parametrize("rtt_ms", [1.0, 5.0])
def test_a_round_trip_added_by_the_relay_slows_each_token_and_changes_no_answer(
    tiny_models: TinyModels, servers: Sequence[RpcServer], rtt_ms: float
) -> None:
    rpc_relay.set_added_rtt(rtt_ms / 1000)
    try:
        print(check(tiny_models.target, ",".join(s.endpoint for s in servers), rtt_ms / 1000))
    finally:
        rpc_relay.set_added_rtt(0.0)


def _namespace_refusal() -> str:
    """Why this machine cannot make a network namespace with a netem loopback ("" if it can)."""
    if not (shutil.which("unshare") and shutil.which("tc") and shutil.which("ip")):
        return "unshare, ip or tc is missing"
    probe = subprocess.run(
        [
            "unshare",
            "-rn",
            "sh",
            "-c",
            "ip link set lo up && tc qdisc add dev lo root netem delay 1ms",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return "" if probe.returncode == 0 else (probe.stderr.strip() or f"exit {probe.returncode}")


def test_a_netem_namespace_round_trip_slows_each_token_and_changes_no_answer(
    tmp_path: Path,
) -> None:
    refusal = _namespace_refusal()
    if refusal:
        pytest.skip(f"no network namespace with tc netem here ({refusal})")
    # netem delays each packet on the namespace's loopback both ways: half the round trip.
    script = (
        "ip link set lo up && tc qdisc add dev lo root netem delay 2500us && "
        f'exec "{sys.executable}" -m tests.helpers.rpc_round_trip 5 "{tmp_path}"'
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "app"), str(ROOT)])}
    run = subprocess.run(
        ["unshare", "-rn", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=env,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    print(run.stdout)
