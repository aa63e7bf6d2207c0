"""`specchat bench --rpc … --rpc-rtt 0,1,5`: plain and auto with the target over RPC at each
added round trip, beside the same prompts with the target on this machine alone."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from specchat import child_processes
from specchat.commands.user_error import UserError
from specchat.own_program import own_program

if TYPE_CHECKING:
    from specchat.bench.live.runner import BenchConfig, BenchProgress
    from specchat.bench.prompts import BenchPrompt
    from specchat.engine.llamacpp.rpc_relay import Traffic

#: How long a loopback server may take to start.
_START_TIMEOUT_S = 60.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--rpc-rtt",
        default="",
        metavar="MS[,MS…]",
        help="with --rpc or --rpc-loopback: run plain and auto locally, then over RPC with "
        "each round trip added to every server response (e.g. 0,1,5), and write rpc.md",
    )
    parser.add_argument(
        "--rpc-loopback",
        type=int,
        default=0,
        metavar="N",
        help="start N `specchat rpc-server`s on 127.0.0.1 for this run and use them as --rpc",
    )


def rtts(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise UserError(f"--rpc-rtt {text!r}: write milliseconds, such as 0,1,5") from None
    if not values or min(values) < 0:
        raise UserError("--rpc-rtt needs round trips of 0 ms or more")
    return values


#: libgomp's spins before a waiting thread sleeps, for processes sharing the cores: about
#: 0.1 ms by libgomp's rough 100,000 spins a millisecond. Longer than the waits between a
#: pass's operations, far shorter than a wait on another process's part of the pass.
COLOCATED_SPIN_COUNT = "10000"


def colocated_wait_policy() -> None:
    """OpenMP threads that spin only briefly before they sleep, in this process and the
    loopback servers it starts; called before llama.cpp loads (libgomp reads it then).

    llama.cpp's CPU backend runs each graph on an OpenMP team. libgomp's default keeps a
    waiting thread spinning for about 3 ms: on loopback this process and its servers share the
    cores, so whoever waits spins on the cores the other needs, and an added round trip mostly
    hid in that spin. Not spinning at all (OMP_WAIT_POLICY=PASSIVE) sleeps and wakes at each
    of a pass's barriers instead: a third of every pass. A spin of about 0.1 ms keeps a pass as
    fast as on a machine of its own and leaves the cores to the others while it waits
    (docs/bench/README.md, "The target over other machines"). A policy or spin count set by
    the user stays."""
    if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
        os.environ["GOMP_SPINCOUNT"] = COLOCATED_SPIN_COUNT


def _server_command(port: int) -> list[str]:
    return [*own_program(), "rpc-server", "--port", str(port)]


@contextmanager
def loopback_servers(count: int) -> Iterator[str]:
    """`count` rpc-servers on 127.0.0.1, as one --rpc value; stopped when the block ends."""
    import socket

    from specchat.engine.llamacpp.rpc_wire import RpcServerError, probe

    processes: list[subprocess.Popen[bytes]] = []
    endpoints: list[str] = []
    try:
        for _ in range(count):
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                port = sock.getsockname()[1]
            processes.append(
                child_processes.start(
                    _server_command(port),
                    own=True,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
            endpoints.append(f"127.0.0.1:{port}")
        deadline = time.monotonic() + _START_TIMEOUT_S
        for endpoint, process in zip(endpoints, processes, strict=True):
            while True:
                try:
                    probe(endpoint, timeout=2.0)
                    break
                except RpcServerError as error:
                    if process.poll() is not None or time.monotonic() > deadline:
                        raise UserError(f"the loopback server did not start: {error}") from None
                    time.sleep(0.2)
        yield ",".join(endpoints)
    finally:
        for process in processes:
            process.kill()
            process.wait(timeout=30)
            child_processes.forget(process)


def run_rpc_bench(
    target: Path,
    draft: Path | None,
    prompts: Sequence[BenchPrompt],
    config: BenchConfig,
    args: argparse.Namespace,
    *,
    progress: Callable[[BenchProgress], None] | None = None,
) -> int:
    """Plain and auto locally, then over the servers at each --rpc-rtt; rpc.md in --out.
    Each setting prices with a cost table of its own, measured in that setting."""
    from dataclasses import replace

    from specchat.bench.live.runner import run_bench
    from specchat.bench.reports.rpc_report import LOCAL, report, setting_result, write
    from specchat.commands.pairs import load_engine
    from specchat.engine.costs.store import CostStore
    from specchat.engine.llamacpp.rpc_relay import reset_traffic, set_added_rtt, traffic

    round_trips = rtts(args.rpc_rtt)
    config = replace(config, modes=("plain", "auto"), floor=False, first_answer=False)
    with servers_for(args) as servers, tempfile.TemporaryDirectory() as costs:
        results = []
        settings = [(LOCAL, "", 0.0)] + [(f"{ms:g} ms", servers, ms) for ms in round_trips]
        for name, rpc, ms in settings:
            print(f"specchat bench: {name} …", file=sys.stderr)
            set_added_rtt(ms / 1000)
            try:
                engine = load_engine(
                    target,
                    draft,
                    argparse.Namespace(**{**vars(args), "rpc": rpc}),
                    cost_store=CostStore(Path(costs) / name.replace(" ", "")),
                )
                try:
                    reset_traffic()
                    outcome = run_bench(engine, prompts, config, progress=progress)
                    if rpc:
                        _print_traffic(name, traffic())
                    results.append(setting_result(name, engine.info.target.remote, outcome))
                finally:
                    engine.close()
            finally:
                set_added_rtt(0.0)
    data = report(results)
    _, md_path = write(data, args.out)
    print(md_path.read_text(encoding="utf-8"))
    goals = data["goals"]
    assert isinstance(goals, list)
    return 1 if any(g["result"] == "FAIL" for g in goals) else 0


def _print_traffic(name: str, seen: Traffic) -> None:
    """What the setting's passes waited on: each waited response one round trip."""
    graphs = seen.commands["GRAPH_COMPUTE"] + seen.commands["GRAPH_RECOMPUTE"]
    print(
        f"specchat bench: {name}: {seen.waited} responses waited on over "
        f"{graphs} server graphs ({seen.waited / max(graphs, 1):.2f} a graph), "
        f"{seen.added_s:.2f} s added, {seen.server_s:.2f} s waiting on the servers",
        file=sys.stderr,
    )


@contextmanager
def servers_for(args: argparse.Namespace) -> Iterator[str]:
    """--rpc-loopback's servers, started here, or --rpc's."""
    if args.rpc_loopback:
        with loopback_servers(args.rpc_loopback) as servers:
            yield servers
    elif args.rpc.strip():
        yield args.rpc
    else:
        raise UserError("--rpc-rtt needs --rpc HOST:PORT[,…] or --rpc-loopback N")
