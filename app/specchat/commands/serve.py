"""`specchat serve`: an OpenAI-compatible API on this machine, for editors and scripts."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from specchat.commands.pairs import add_kv_cache_argument, add_rpc_arguments
from specchat.commands.user_error import UserError

if TYPE_CHECKING:
    from specchat.host.keeper import ChatKeeper

#: Where the key may come from instead of the command line (which other users can see).
KEY_ENV = "SPECCHAT_API_KEY"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--pair", help="catalog pair id (default: the 'default' pair)")
    source.add_argument("--target", type=Path, help="target GGUF file")
    parser.add_argument("--draft", type=Path, help="draft GGUF file (with --target)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    parser.add_argument(
        "--api-key",
        default=os.environ.get(KEY_ENV, ""),
        help=f"key clients must send (or set {KEY_ENV}); required off 127.0.0.1",
    )
    parser.add_argument("--ctx", type=int, default=8192, help="context window in tokens")
    parser.add_argument("--gpu-layers", type=int, default=-1, help="-1 = all that fit")
    parser.add_argument("--threads", type=int, default=None)
    add_kv_cache_argument(parser)
    add_rpc_arguments(parser)
    parser.add_argument(
        "--cors",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="let a web page from ORIGIN call the API (repeatable; none by default)",
    )
    parser.add_argument(
        "--queue", type=int, default=8, help="requests that may wait their turn (default 8)"
    )
    parser.add_argument(
        "--no-idle-timing",
        action="store_true",
        help="time nothing between requests (no plain-speed calibration at start, no cost-table "
        "passes while idle): for a benchmark timing other processes on this machine meanwhile",
    )


def _keeper() -> ChatKeeper | None:
    """The conversation store's writer when the user keeps API chats (else None)."""
    from specchat import settings
    from specchat.host.keeper import ChatKeeper
    from specchat.store.conversations import ConversationStore, StoreError

    if not settings.Settings().get(settings.REMEMBER_API_CHATS):
        return None
    try:
        return ChatKeeper(ConversationStore())
    except StoreError as error:
        raise UserError(f"API chats cannot be kept: {error}") from None


def run(args: argparse.Namespace) -> int:
    from specchat.commands.pairs import describe_load, load_engine, model_files
    from specchat.serve.guard import ServeOptions, check_options
    from specchat.serve.server import ApiServer

    options = ServeOptions(
        host=args.host,
        port=args.port,
        api_key=args.api_key,
        cors=tuple(args.cors),
        capacity=args.queue,
    )
    try:
        check_options(options)
    except ValueError as error:
        raise UserError(str(error)) from None
    if args.ctx < 256:
        raise UserError("--ctx must be at least 256 tokens")
    target, draft = model_files(args)
    err = sys.stderr
    err.write(f"loading {target.name}" + (f" + {draft.name}" if draft else "") + " …\n")
    engine = load_engine(target, draft, args)
    err.write(describe_load(engine))
    from specchat.engine.llamacpp.prefix_cache import PrefixCache

    try:
        keeper = _keeper()
        # Chats kept on disk only where the user keeps them (api.remember_chats): else
        # they live in memory while it serves, their caches too.
        prefixes = PrefixCache() if keeper is None else PrefixCache.on_disk()
        idle_timing = not args.no_idle_timing
        server = ApiServer.for_engine(
            engine,
            options,
            prefixes=prefixes,
            calibrate_plain=idle_timing,
            profile=idle_timing,
        )
        if keeper is not None:
            server.executor.runner.keeper = keeper
        address = server.bind()
    except OSError as error:
        engine.close()
        raise UserError(f"cannot listen on {args.host}:{args.port}: {error.strerror}") from None
    err.write(
        f"serving {server.served.model_id} at {address.base_url}"
        + (" (API key required)" if options.api_key else "")
        + "\nCtrl-C stops it.\n"
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass  # uvicorn stopped on Ctrl-C and raises it again once it has
    finally:
        engine.close()
    err.write("stopped\n")
    return 0
