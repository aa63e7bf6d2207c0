"""PyInstaller's entry script: the frozen `specchat` runs exactly what the console script runs."""

import multiprocessing
import sys

from specchat.__main__ import main

if __name__ == "__main__":
    # `specchat models optimise` runs llama.cpp's quantizer in a spawned child process; in a
    # frozen bundle that child is this executable again, which freeze_support() recognises.
    multiprocessing.freeze_support()
    sys.exit(main())
