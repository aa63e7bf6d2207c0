"""Peers side by side: which start together, and the order they answer each prompt in (real
llama-cpp-python peers on the tiny target)."""

from __future__ import annotations

from pathlib import Path

from specchat.bench.peers.configs import PYTHON_LOOKUP, PYTHON_PLAIN, PeerConfig
from specchat.bench.peers.llama_server import ServerSettings
from specchat.bench.peers.run import PeerPrompt, run_peers
from specchat.bench.peers.turns import (
    MEMORY_RESERVE_BYTES,
    available_memory,
    fits,
    footprint,
    turn_order,
)
from specchat.tinymodels import TinyModels

PEERS = (PeerConfig(PYTHON_PLAIN), PeerConfig(PYTHON_LOOKUP, lookup=True))


def test_turn_order_turns_from_prompt_to_prompt_and_pass_to_pass() -> None:
    peers = ["a", "b", "c"]
    assert [turn_order(peers, i) for i in range(4)] == [
        ["a", "b", "c"],
        ["b", "c", "a"],
        ["c", "a", "b"],
        ["a", "b", "c"],
    ]
    # Over as many prompts as peers, each peer answers once in every place.
    places = {p: sorted(turn_order(peers, i).index(p) for i in range(3)) for p in peers}
    assert places == {p: [0, 1, 2] for p in peers}
    assert turn_order([], 3) == []


def test_a_peer_starts_beside_others_only_with_memory_to_spare(tmp_path: Path) -> None:
    target = tmp_path / "t.gguf"
    target.write_bytes(b"x" * 1000)
    draft = tmp_path / "d.gguf"
    draft.write_bytes(b"x" * 300)
    need = footprint(target, (draft,))
    assert need == 1300
    assert fits(need, need + MEMORY_RESERVE_BYTES)
    assert not fits(need, need + MEMORY_RESERVE_BYTES - 1)
    assert not fits(need, None)  # unknown: one at a time
    assert footprint(target, (tmp_path / "missing.gguf",)) == 1000
    free = available_memory()
    assert free is None or free > 0
    config = PeerConfig("x", ("--spec-type", "draft-simple", "-md", str(draft)))
    assert config.files_beside_target == (draft,)
    assert PeerConfig("y", specchat_mode="auto", draft=draft).files_beside_target == (draft,)
    assert PeerConfig("z", ("--spec-default",)).files_beside_target == ()


def _prompts() -> list[PeerPrompt]:
    return [
        PeerPrompt(f"p{i}", "code", ({"role": "user", "content": "x"},), tuple(range(5 + i, 25)))
        for i in range(3)
    ]


def _settings(tiny_models: TinyModels) -> ServerSettings:
    return ServerSettings(tiny_models.target, threads=1, ctx=256, key_type="f16", gpu_layers=0)


def test_peers_alive_together_answer_each_prompt_in_turn(tiny_models: TinyModels) -> None:
    prompts = _prompts()
    records = run_peers(
        PEERS,
        prompts,
        _settings(tiny_models),
        binary=None,
        max_tokens=8,
        repeat=2,
        free_memory=lambda: 1 << 50,
    )
    assert [r.error for r in records] == [""] * 12
    order = [(r.repeat, r.prompt, r.peer) for r in records]
    # Each prompt turns the order by one; pass 1 starts its peers in an order turned by one.
    assert order[:6] == [
        (0, "p0", PYTHON_PLAIN),
        (0, "p0", PYTHON_LOOKUP),
        (0, "p1", PYTHON_LOOKUP),
        (0, "p1", PYTHON_PLAIN),
        (0, "p2", PYTHON_PLAIN),
        (0, "p2", PYTHON_LOOKUP),
    ]
    assert order[6:8] == [(1, "p0", PYTHON_LOOKUP), (1, "p0", PYTHON_PLAIN)]
    # Both decode the same tokens greedily: the same answer, each of 8 tokens.
    for rep, prompt, _ in order[::2]:
        pair = [r for r in records if (r.repeat, r.prompt) == (rep, prompt)]
        assert pair[0].token_ids == pair[1].token_ids and pair[0].tokens == 8


def test_without_memory_to_spare_peers_run_one_at_a_time(tiny_models: TinyModels) -> None:
    prompts = _prompts()
    records = run_peers(
        PEERS, prompts, _settings(tiny_models), binary=None, max_tokens=4, free_memory=lambda: None
    )
    assert [(r.peer, r.prompt) for r in records] == [
        *((PYTHON_PLAIN, p.id) for p in prompts),
        *((PYTHON_LOOKUP, p.id) for p in prompts),
    ]
