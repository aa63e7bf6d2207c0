"""One check of a target spread over two loopback rpc-servers with a slower network: its T = 0
answer equals this machine's, and each token waits at least one round trip per server (run by
tests/engine/test_rpc_latency.py, the relay adding the round trip)."""

from __future__ import annotations

import time
from pathlib import Path

from specchat.engine.llamacpp.rpc_placement import RemoteTarget
from specchat.engine.session import ChatEngine
from specchat.engine.types import Controls, GenerationRequest

TOKENS = 12


def _answer(engine: ChatEngine) -> tuple[list[int], float]:
    prompt = engine.target.tokenize("Once upon a time there was", add_special=False)
    ids: list[int] = []
    start = time.perf_counter()
    for result in engine.generate(GenerationRequest(tuple(prompt), TOKENS, Controls("plain", 0))):
        ids += [e.token for e in result.events]
    return ids, time.perf_counter() - start


def check(target: Path, endpoints: str, rtt_s: float) -> str:
    """Raises AssertionError unless the spread target answers as the local one, at least
    one round trip per server per token slower; returns what it measured."""
    local = ChatEngine.load(target, None, n_ctx=512, n_threads=1)
    try:
        expected, local_s = _answer(local)
    finally:
        local.close()
    remote = RemoteTarget.parse(endpoints, "0," + ",".join("1" for _ in endpoints.split(",")))
    engine = ChatEngine.load(target, None, n_ctx=512, n_threads=1, remote=remote)
    try:
        answer, remote_s = _answer(engine)
    finally:
        engine.close()
    assert answer == expected, (answer, expected)
    floor = len(answer) * len(endpoints.split(",")) * rtt_s
    assert remote_s >= 0.9 * floor, (
        f"{remote_s:.3f} s for {len(answer)} tokens, floor {floor:.3f} s"
    )
    return f"{len(answer)} tokens: {local_s:.3f} s here, {remote_s:.3f} s over RPC"
