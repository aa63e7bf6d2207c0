"""`specchat models ARGV` in-process, exiting the way specchat.cli.main does."""

from __future__ import annotations

import argparse
import sys

from specchat.commands import models as models_command
from specchat.commands.user_error import UserError


def run_cli(*argv: str) -> int:
    """Run `specchat models ARGV` the way specchat.cli.main does (UserError -> exit 2)."""
    parser = argparse.ArgumentParser(prog="specchat models")
    models_command.add_arguments(parser)
    try:
        return models_command.run(parser.parse_args(list(argv)))
    except UserError as error:
        print(f"specchat: {error}", file=sys.stderr)
        return 2
