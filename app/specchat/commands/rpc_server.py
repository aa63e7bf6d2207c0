"""`specchat rpc-server`: offer this machine's devices to another SpecChat, whose target's
layers then run here in part (llama.cpp's RPC backend, from the installed library)."""

from __future__ import annotations

import argparse
import os
import sys
import threading
from pathlib import Path

from specchat.commands.user_error import UserError

#: What a server reachable from other machines risks, said whenever it is started so.
EXPOSED_WARNING = (
    "warning: {host} is not a loopback address. The RPC protocol has no authentication and "
    "no encryption: anyone who can reach port {port} can run computations on this machine "
    "and read what it holds for its clients. Serve only on a network you trust (a private "
    "LAN, a VPN or an SSH tunnel), never on an open one."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from specchat.engine.llamacpp.rpc_wire import DEFAULT_PORT

    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only; see the warning "
        "another address prints)",
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})"
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="CPU threads (default: the physical cores)"
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep the tensors clients send in DIR, so a reload sends only their hashes",
    )


def run(args: argparse.Namespace) -> int:
    from specchat.engine.llamacpp import rpc_devices
    from specchat.engine.llamacpp.backend import default_threads
    from specchat.engine.llamacpp.rpc_devices import RpcUnavailable, local_devices, serve
    from specchat.engine.llamacpp.rpc_wire import is_loopback

    if not 0 < args.port < 65536:
        raise UserError("--port must be 1 to 65535")
    if args.threads is not None and args.threads < 1:
        raise UserError("--threads must be at least 1")
    if args.cache is not None:
        try:
            args.cache.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise UserError(f"--cache {args.cache}: {error.strerror or error}") from None
    if not is_loopback(args.host):
        print(EXPOSED_WARNING.format(host=args.host, port=args.port), file=sys.stderr)
    try:
        rpc_devices.check_available()
    except RpcUnavailable as error:
        raise UserError(str(error)) from None
    devices = local_devices()
    if not devices:
        raise UserError("llama.cpp found no device to serve")
    host = f"[{args.host}]" if ":" in args.host else args.host
    endpoint = f"{host}:{args.port}"
    threads = args.threads or default_threads()
    for device in devices:
        print(
            f"serving {device.name} ({device.description}): {device.free / 2**30:.1f} GiB free",
            file=sys.stderr,
        )
    sys.stdout.flush()
    # ggml's server loop never returns while it serves, and Python runs Ctrl-C's handler only
    # between its own instructions: the loop runs on a thread, the main thread waits on it.
    done = threading.Event()

    def serve_until_done() -> None:
        try:
            serve(endpoint, threads=threads, cache=args.cache, devices=devices)
        finally:
            done.set()

    threading.Thread(target=serve_until_done, name="rpc-server", daemon=True).start()
    while not done.wait(0.5):
        pass
    # ggml returned: it could not listen (it printed why: the port in use, a bad address).
    print(f"specchat: the RPC server could not start on {endpoint}", file=sys.stderr)
    os._exit(1)
