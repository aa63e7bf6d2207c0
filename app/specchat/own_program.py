"""How SpecChat starts itself in a child process (an rpc-server, a server a bench asks)."""

from __future__ import annotations

import sys


def own_program() -> list[str]:
    """The command that runs SpecChat's CLI: the bundle's own executable where frozen, else
    this Python with `-m specchat`."""
    if getattr(sys, "frozen", False):
        return [sys.executable]
    return [sys.executable, "-m", "specchat"]
