"""A target over RPC on a slower network (`make test-slow`): the answer unchanged, each token
waiting out the round trips. The round trip is added by SpecChat's relay (one per response
llama.cpp waits on), never by a shared interface."""

from __future__ import annotations

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
