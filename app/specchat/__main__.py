"""Entry point: `python -m specchat` and the `specchat` console script."""

from __future__ import annotations

import sys


def _run_gui() -> int:
    # Imported only when the window is wanted: headless subcommands never load Qt.
    from specchat.ui.window.application import run_app

    return run_app(sys.argv[:1])


def main() -> int:
    import multiprocessing

    # A bundle re-enters here to start its helper processes (the chat-template host).
    multiprocessing.freeze_support()
    from specchat.cli import main as cli_main

    return cli_main(sys.argv[1:], gui=_run_gui)


def gui_main() -> int:
    import multiprocessing

    multiprocessing.freeze_support()
    return _run_gui()


if __name__ == "__main__":
    sys.exit(main())
