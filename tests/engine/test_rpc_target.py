"""A target spread over `specchat rpc-server`s on loopback (llama.cpp's RPC backend): its
layers placed on this machine and the servers, T = 0 answers equal to the local ones, a
server that cannot be used or is lost mid-answer an error naming it, with nothing lost."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from specchat.engine.costs.key import CostKey
from specchat.engine.llamacpp import rpc_devices
from specchat.engine.llamacpp.load import RemoteLoadError
from specchat.engine.llamacpp.model import DecodeError, LlamaModel
from specchat.engine.llamacpp.rpc_placement import RemoteTarget
from specchat.engine.llamacpp.rpc_wire import CAPS_SIZE, parse_endpoints
from specchat.engine.session import ChatEngine
from specchat.engine.templates.chat_template import ChatMessage
from specchat.engine.types import Controls, GenerationRequest
from specchat.tinymodels import TinyModels
from tests.engine.test_real_pair import NEAR_TIE, QUESTIONS
from tests.helpers.engine import run
from tests.helpers.rpc_servers import RpcServer, free_port, rpc_servers

PROMPT = "Once upon a time there was"

needs_rpc = pytest.mark.skipif(
    not rpc_devices.available(),
    reason="this llama.cpp has no RPC backend (rebuild the venv: `make test` builds it)",
)


@pytest.fixture(scope="module")
def servers() -> Iterator[Sequence[RpcServer]]:
    # Every llama.cpp SpecChat builds has the RPC backend: one without is a broken set-up.
    assert rpc_devices.available(), "this llama.cpp has no RPC backend: rebuild the venv"
    with rpc_servers(2) as running:
        yield running


def _remote(servers: Sequence[RpcServer], split: str = "") -> RemoteTarget:
    remote = RemoteTarget.parse(",".join(s.endpoint for s in servers), split)
    assert remote is not None
    return remote


def _answer(engine: ChatEngine, mode: str, n: int = 24, k: int = 4) -> list[int]:
    prompt = engine.target.tokenize(PROMPT, add_special=False)
    ids: list[int] = []
    for result in engine.generate(GenerationRequest(tuple(prompt), n, Controls(mode, k))):
        ids += [e.token for e in result.events]
    return ids


def test_endpoints_parse_with_the_default_port_and_say_what_is_wrong() -> None:
    assert parse_endpoints("10.0.0.2:5000, box,10.0.0.2:5000") == ("10.0.0.2:5000", "box:50052")
    with pytest.raises(ValueError, match="port"):
        parse_endpoints("box:http")
    with pytest.raises(ValueError, match="needs 3 shares"):
        RemoteTarget.parse("a:1,b:2", "1,2")


@needs_rpc
def test_a_server_that_cannot_be_reached_is_named(tiny_models: TinyModels) -> None:
    endpoint = f"127.0.0.1:{free_port()}"
    with pytest.raises(RemoteLoadError, match=f"RPC server {endpoint}: cannot be reached"):
        LlamaModel(tiny_models.target, n_ctx=256, remote=RemoteTarget.parse(endpoint))


@needs_rpc
def test_a_server_of_another_protocol_is_named(tiny_models: TinyModels) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    endpoint = f"127.0.0.1:{listener.getsockname()[1]}"

    def answer_as_version_6() -> None:
        client, _ = listener.accept()
        with client:
            client.recv(9 + CAPS_SIZE)
            client.sendall(struct.pack("<Q4B", 4 + CAPS_SIZE, 6, 0, 0, 0) + bytes(CAPS_SIZE))

    thread = threading.Thread(target=answer_as_version_6, daemon=True)
    thread.start()
    with listener, pytest.raises(RemoteLoadError, match=f"{endpoint}.*protocol 6.0.0"):
        LlamaModel(tiny_models.target, n_ctx=256, remote=RemoteTarget.parse(endpoint))
    thread.join(timeout=10)


def test_the_tiny_pair_spread_over_two_servers_answers_as_it_does_here(
    tiny_models: TinyModels, servers: Sequence[RpcServer]
) -> None:
    local = ChatEngine.load(tiny_models.target, tiny_models.draft_close, n_ctx=512, n_threads=1)
    try:
        expected = _answer(local, "plain")
        local_key = CostKey.of(local.target)
    finally:
        local.close()
    # Everything on the servers, the output layer aside, so both really compute.
    engine = ChatEngine.load(
        tiny_models.target,
        tiny_models.draft_close,
        n_ctx=512,
        n_threads=1,
        remote=_remote(servers, "0,1,1"),
    )
    try:
        assert engine.info.target.remote == _remote(servers, "0,1,1").key()
        assert engine.info.draft is not None and not engine.info.draft.remote
        assert _answer(engine, "plain") == expected
        assert _answer(engine, "draft") == expected
        # Its cost table is another than the local one's: passes cross the network.
        assert CostKey.of(engine.target).digest() != local_key.digest()
    finally:
        engine.close()


def test_a_server_lost_mid_answer_is_named_and_the_answer_so_far_kept(
    tiny_models: TinyModels, servers: Sequence[RpcServer]
) -> None:
    with rpc_servers(1) as doomed:
        remote = _remote([servers[0], doomed[0]], "0,1,1")
        engine = ChatEngine.load(tiny_models.target, None, n_ctx=512, n_threads=1, remote=remote)
        prompt = engine.target.tokenize(PROMPT, add_special=False)
        kept: list[int] = []
        with pytest.raises(DecodeError, match=f"RPC server {doomed[0].endpoint} stopped"):
            generation = engine.generate(GenerationRequest(tuple(prompt), 64, Controls("plain", 0)))
            for result in generation:
                kept += [e.token for e in result.events]
                if len(kept) == 4:
                    doomed[0].kill()
        assert len(kept) >= 4
        engine.close()
    # The pair reloads on this machine alone, and answers as before the loss.
    local = ChatEngine.load(tiny_models.target, None, n_ctx=512, n_threads=1)
    try:
        assert _answer(local, "plain", n=len(kept))[:4] == kept[:4]
    finally:
        local.close()


@pytest.mark.real_model
def test_the_default_pair_spread_over_two_servers_answers_as_it_does_here(
    real_pair: tuple[Path, Path], servers: Sequence[RpcServer]
) -> None:
    """Equal, or parted at a near tie: a server's CPU runs the weights as they are stored,
    this machine's repacked for its own kernels (llama.cpp's CPU_REPACK), and the two round
    differently; as everywhere, speculation over the servers answers as plain does there."""
    target, draft = real_pair
    question = [ChatMessage("user", QUESTIONS[1])]
    local = ChatEngine.load(target, draft, n_ctx=1024)
    try:
        prompt = local.prepare(question, max_tokens=16).tokens
        here = run(local.decoder, prompt, mode="plain", max_tokens=16)
    finally:
        local.close()
    engine = ChatEngine.load(target, draft, n_ctx=1024, remote=_remote(servers))
    try:
        plain = run(engine.decoder, prompt, mode="plain", max_tokens=16)
        auto = run(engine.decoder, prompt, mode="auto", k=4, max_tokens=16)
    finally:
        engine.close()
    for reference, answer in ((here, plain), (plain, auto)):
        parted = [
            i
            for i, (a, b) in enumerate(zip(reference.tokens, answer.tokens, strict=False))
            if a != b
        ]
        if parted:
            assert reference.events[parted[0]].margin < NEAR_TIE, (parted, reference.text)


def test_a_hybrids_mtp_head_drafts_here_and_answers_as_plain_does(
    tmp_path: Path, servers: Sequence[RpcServer]
) -> None:
    """The target's own MTP layers stay on this machine with its output layer; the rest
    spread over the servers, and drafting with the head changes no answer."""
    from specchat.tinyarch import write_tiny_qwen35

    hybrid = write_tiny_qwen35(tmp_path / "qwen35-mtp.gguf", mtp=True)
    engine = ChatEngine.load(hybrid, None, n_ctx=512, n_threads=1, remote=_remote(servers, "0,1,1"))
    try:
        assert "mtp" in engine.info.drafters
        assert _answer(engine, "mtp", n=16) == _answer(engine, "plain", n=16)
    finally:
        engine.close()
