"""The error a subcommand raises for bad input; the CLI prints its message, no traceback."""

from __future__ import annotations


class UserError(Exception):
    """An error whose message is for the user; printed without a traceback."""
