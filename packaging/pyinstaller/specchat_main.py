"""PyInstaller's entry script: the frozen `specchat` runs exactly what the console script runs."""

import sys

from specchat.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
