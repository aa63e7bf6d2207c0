"""`specchat bench --peers`: llama-server and llama-cpp-python on the bench's prompts, in the
same run as SpecChat's modes (bench/peers), after SpecChat's pair is closed."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from specchat.bench.peers.llama_server import ServerSettings
    from specchat.bench.peers.peers_table import PeersOutcome
    from specchat.bench.peers.run import PeerPrompt
    from specchat.bench.prompts import BenchPrompt
    from specchat.engine.session import ChatEngine


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--peers",
        action="store_true",
        help="also run llama.cpp's llama-server (plain, --spec-default, draft-simple at its "
        "default n-max and at 2, 4 and 8, the pair's heads) and llama-cpp-python (plain, "
        "prompt lookup) on the same files, prompts, threads, context and KV cache (T = 0); "
        "the report gets a peers table (llama-server from `make llama-tools`)",
    )
    parser.add_argument(
        "--llama-server",
        type=Path,
        metavar="FILE",
        help="with --peers: this llama-server binary instead of the one `make llama-tools` built",
    )


def prepare(
    engine: ChatEngine, prompts: Sequence[BenchPrompt], args: argparse.Namespace, draft: Path | None
) -> dict[str, Any]:
    """What the peers need from the loaded pair (read before it is closed): its prompts'
    tokens, the settings it ran with, its heads."""
    from specchat.bench.peers.llama_server import ServerSettings
    from specchat.bench.peers.run import PeerPrompt
    from specchat.engine.templates.chat_template import ChatMessage

    peer_prompts = []
    for p in prompts:
        messages = p.messages()
        tokens = engine.prepare(
            [ChatMessage(m["role"], m["content"]) for m in messages], max_tokens=args.max_tokens
        ).tokens
        peer_prompts.append(
            PeerPrompt(p.id, p.category, tuple(dict(m) for m in messages), tuple(tokens))
        )
    info = engine.info.target
    settings = ServerSettings(
        target=info.path,
        threads=info.n_threads,
        ctx=args.ctx,
        key_type=info.key_type.lower(),
        gpu_layers=args.gpu_layers,
    )
    return {
        "prompts": peer_prompts,
        "settings": settings,
        "heads": tuple(engine.decoder.drafters.heads()),
        "draft": draft,
        "backend": info.backend,
    }


def run(prepared: dict[str, Any], args: argparse.Namespace) -> PeersOutcome:
    """Run every peer; the outcome's `peers` (settings and records)."""
    import llama_cpp

    from specchat.bench.peers.configs import peer_configs
    from specchat.bench.peers.llama_server import find_llama_server
    from specchat.bench.peers.peers_table import PeersOutcome
    from specchat.bench.peers.run import run_peers
    from specchat.bench.peers.server_process import PeerError
    from specchat.bench.peers.turns import available_memory

    settings: ServerSettings = prepared["settings"]
    prompts: list[PeerPrompt] = prepared["prompts"]
    binary: Path | None
    try:
        binary = find_llama_server(
            llama_cpp.__version__, prepared["backend"], getattr(args, "llama_server", None)
        )
    except PeerError as error:
        print(f"specchat bench: {error}; llama-server peers skipped", file=sys.stderr)
        binary = None
    configs = peer_configs(draft=prepared["draft"], heads=prepared["heads"])

    def progress(done: int, total: int, label: str) -> None:
        print(f"[peers {done}/{total}] {label}", file=sys.stderr, flush=True)

    records = run_peers(
        configs,
        prompts,
        settings,
        binary=binary,
        max_tokens=args.max_tokens,
        repeat=args.repeat,
        progress=progress,
        # Offloaded weights share the GPU's memory, which the check does not read: one peer
        # at a time there.
        free_memory=available_memory if prepared["backend"] == "CPU" else lambda: None,
    )
    return PeersOutcome(
        settings={
            "threads": settings.threads,
            "ctx": settings.ctx,
            "key_type": settings.key_type,
            "server": None if binary is None else str(binary),
            "server_arguments": settings.arguments(),
            "peers": {c.name: list(c.shown_arguments) for c in configs},
        },
        records=tuple(records),
    )


def via_api(engine: ChatEngine, prompts: Sequence[BenchPrompt], args: argparse.Namespace) -> bool:
    """`--via-api --peers`: `specchat serve` over the loaded pair and every llama-server type
    through the same `openai` client; writes via-api-peers.json, prints one line a server.
    False when no llama-server could answer."""
    import json

    import llama_cpp

    from specchat.bench.api.via_api import serving
    from specchat.bench.peers.api_peers import SPECCHAT_SERVE, compare_servers, summarise
    from specchat.bench.peers.configs import peer_configs
    from specchat.bench.peers.llama_server import find_llama_server
    from specchat.bench.peers.server_process import PeerError

    try:
        import openai  # noqa: F401
    except ImportError:
        print("specchat bench: --via-api --peers needs the `openai` package", file=sys.stderr)
        return False
    draft = engine.info.draft.path if engine.info.draft else None
    setup = prepare(engine, (), args, draft)
    try:
        binary = find_llama_server(
            llama_cpp.__version__, setup["backend"], getattr(args, "llama_server", None)
        )
    except PeerError as error:
        print(f"specchat bench: {error}", file=sys.stderr)
        return False
    configs = [c for c in peer_configs(draft=draft, heads=setup["heads"]) if c.is_server]
    with serving(engine) as (_, port):
        answers = compare_servers(
            port,
            configs,
            prompts,
            setup["settings"],
            binary,
            max_tokens=args.max_tokens,
            repeat=args.repeat,
            progress=lambda name: print(f"[via API] {name}", file=sys.stderr, flush=True),
        )
    report = summarise(answers)
    report["settings"] = {"server": str(binary), "server_arguments": setup["settings"].arguments()}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "via-api-peers.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    for name, tok_s in report["tok_s"].items():
        mark = " (best llama-server)" if name == report["best_llama_server"] else ""
        print(f"{name:40} {tok_s:8.1f} tok/s through the API{mark}")
    for prompt, ratio in report["specchat_over_best"].items():
        print(f"{prompt:32} {SPECCHAT_SERVE} ÷ best llama-server ×{ratio:.3f}")
    print(f"report: {args.out / 'via-api-peers.json'}")
    return report["best_llama_server"] is not None
