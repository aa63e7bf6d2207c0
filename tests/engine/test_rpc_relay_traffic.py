"""What a target pass over RPC waits on, and what the relay's added round trip costs it.

llama.cpp's client sends most commands without waiting for an answer (SET_TENSOR, and
GRAPH_COMPUTE / GRAPH_RECOMPUTE in the protocol this llama.cpp speaks) and waits on one
response per server a pass crosses: the GET_TENSOR that brings a server's activations back
to this machine, to go on to the next server or to the output layer. On a network each of
those is one round trip; the relay (rpc_relay.set_added_rtt) must add exactly that, once per
waited exchange, never per request, per chunk or per response byte."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

import pytest

from specchat.engine.llamacpp import rpc_devices, rpc_relay
from specchat.engine.llamacpp.model import LlamaModel
from specchat.engine.llamacpp.rpc_placement import RemoteTarget
from specchat.tinymodels import TinyModels
from tests.helpers.rpc_servers import RpcServer, rpc_servers

pytestmark = pytest.mark.skipif(
    not rpc_devices.available(), reason="this llama.cpp has no RPC backend"
)

PASSES = 8
RTT_S = 0.010
#: Commands the client sends and never waits on: they travel while it works.
NO_RESPONSE = {"SET_TENSOR", "GRAPH_COMPUTE", "GRAPH_RECOMPUTE"}


@pytest.fixture(scope="module")
def servers() -> Iterator[Sequence[RpcServer]]:
    with rpc_servers(2) as running:
        yield running


def _passes(model: LlamaModel, at: int, token: int, rtt_s: float) -> list[float]:
    """PASSES single-token passes at the same position, each timed."""
    rpc_relay.set_added_rtt(rtt_s)
    rpc_relay.reset_traffic()
    times = []
    try:
        for _ in range(PASSES):
            model.truncate(at)
            began = time.perf_counter()
            model.decode([token])
            times.append(time.perf_counter() - began)
    finally:
        rpc_relay.set_added_rtt(0.0)
    return times


def test_each_pass_waits_once_per_server_and_the_relay_adds_one_round_trip_to_each_wait(
    tiny_models: TinyModels, servers: Sequence[RpcServer]
) -> None:
    # Every layer on the servers, so each pass crosses both.
    remote = RemoteTarget.parse(",".join(s.endpoint for s in servers), "0,1,1")
    model = LlamaModel(tiny_models.target, n_ctx=256, n_threads=1, remote=remote)
    try:
        prompt = model.tokenize("Once upon a time there was", add_special=False)
        model.decode(prompt)
        _passes(model, len(prompt), prompt[-1], 0.0)  # the servers keep this pass's graph
        plain = _passes(model, len(prompt), prompt[-1], 0.0)
        at_zero = rpc_relay.traffic()
        slowed = _passes(model, len(prompt), prompt[-1], RTT_S)
        at_rtt = rpc_relay.traffic()
    finally:
        model.close()

    # The same commands either way, and one waited exchange per server a pass crosses.
    assert at_zero.commands == at_rtt.commands
    waits = len(servers)
    assert at_rtt.waited == at_zero.waited == waits * PASSES, at_rtt
    assert at_rtt.commands["GET_TENSOR"] == waits * PASSES, at_rtt
    unanswered = sum(n for name, n in at_rtt.commands.items() if name in NO_RESPONSE)
    assert unanswered + at_rtt.waited == sum(at_rtt.commands.values()), at_rtt
    # The relay held each waited response one round trip, and nothing else.
    assert at_zero.added_s == 0.0
    assert at_rtt.added_s >= at_rtt.waited * RTT_S
    # Each wait is on the pass's path: no pass is faster than its round trips; and the
    # round trips are all it added (less than one more round trip a pass, at the fastest).
    assert min(slowed) >= waits * RTT_S, (slowed, waits)
    added = min(slowed) - min(plain)
    assert waits * RTT_S - 0.5 * RTT_S < added < (waits + 1) * RTT_S, (added, slowed, plain)
