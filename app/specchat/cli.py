"""Command-line dispatch: `specchat` opens the window; subcommands work headless."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

from specchat.commands.user_error import UserError

#: Subcommand name -> module under specchat.commands defining `add_arguments(parser)` and
#: `run(args) -> int`. Modules are imported lazily so `specchat --help` stays instant.
SUBCOMMANDS: dict[str, str] = {
    "generate": "Generate an answer in the terminal, tokens coloured by how they were made",
    "bench": "Measure every drafting mode side by side and write a report",
    "models": "List, fetch, verify and locate catalog model pairs",
    "soak": "Generate continuously and report memory over time",
    "serve": "Serve an OpenAI-compatible API (with Predicted Outputs) on this machine",
    "rpc-server": "Offer this machine's CPU or GPUs to another SpecChat's target (llama.cpp RPC)",
}


class _VersionAction(argparse._VersionAction):
    """--version: SpecChat's version, then llama-cpp-python's and the backend it loaded."""

    def __call__(self, parser: argparse.ArgumentParser, *_args: object, **_kwargs: object) -> None:
        try:
            from specchat.engine.llamacpp.backend import build_line

            line = build_line()
        # A broken llama.cpp must not hide the version people are asked for in bug reports.
        except Exception as error:
            line = f"llama.cpp: not loadable ({type(error).__name__}: {error})"
        print(f"{self.version}\n{line}")
        parser.exit()


def _module(command: str) -> str:
    """The module of a subcommand: 'rpc-server' is specchat.commands.rpc_server."""
    return command.replace("-", "_")


def build_parser() -> argparse.ArgumentParser:
    from specchat import __version__

    parser = argparse.ArgumentParser(
        prog="specchat",
        description="Chat with local language models faster, through speculative decoding.",
    )
    parser.add_argument(
        "--version",
        action=_VersionAction,
        version=f"SpecChat {__version__}",
        help="show SpecChat's version and the llama.cpp build it runs on (CPU kernels, GPU)",
    )
    parser.add_argument(
        "--self-test",
        action="store_true",
        help="load two tiny built-in models, generate a few tokens, exit 0 on success",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text in SUBCOMMANDS.items():
        try:
            module = importlib.import_module(f"specchat.commands.{_module(name)}")
        except ModuleNotFoundError as error:
            # A subcommand still being written must not take the others down with it.
            if error.name != f"specchat.commands.{_module(name)}":
                raise
            continue
        command_parser = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(command_parser)
        command_parser.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None, *, gui: Callable[[], int] | None = None) -> int:
    """Run a subcommand, the self-test, or (with no command) the GUI through `gui`."""
    from specchat.child_processes import follow_parent

    follow_parent()  # a server a bench started ends with the bench
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.self_test:
            from specchat.commands.selftest import run_self_test

            return run_self_test()
        if args.command is None:
            if gui is None:
                parser.print_help()
                return 0
            return gui()
        return int(args._run(args))
    except UserError as error:
        print(f"specchat: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nspecchat: interrupted", file=sys.stderr)
        return 130
