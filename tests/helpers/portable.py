"""The portable packaging environment `make` builds (.venv-package), for the bundle tests."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Where `make test` and `make package` put it (the Makefile's PACKAGE_VENV).
PACKAGE_VENV = ROOT / ".venv-package"
CHECKER = ROOT / "packaging" / "check_instructions.py"
#: The x86-64 CPU variants llama.cpp's GGML_CPU_ALL_VARIANTS builds (ggml/src/CMakeLists.txt).
X86_VARIANTS = frozenset(
    [
        "x64",
        "sse42",
        "sandybridge",
        "ivybridge",
        "piledriver",
        "haswell",
        "skylakex",
        "cannonlake",
        "cascadelake",
        "icelake",
        "cooperlake",
        "zen4",
        "alderlake",
        "sapphirerapids",
    ]
)


def package_python() -> Path:
    """The packaging environment's Python; a clear failure when `make` has not built it."""
    python = PACKAGE_VENV / "bin" / "python"
    if not python.exists():
        pytest.fail(f"{PACKAGE_VENV} is missing: `make test` (or `make package`) builds it")
    return python


def portable_lib_dir() -> Path:
    """llama_cpp/lib of the portable build: libllama and the libggml-cpu-* variants."""
    done = subprocess.run(
        [str(package_python()), "-c", "import llama_cpp.llama_cpp as l; print(l._base_path)"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.strip())


def run_checker(target: Path) -> subprocess.CompletedProcess[str]:
    """packaging/check_instructions.py on a bundle or a folder of libraries."""
    # The packaging environment's Python: it has PyInstaller, to unpack a one-file bundle.
    return subprocess.run(
        [str(package_python()), str(CHECKER), str(target)],
        capture_output=True,
        text=True,
        timeout=900,
    )


def variants_listed(report: str) -> set[str]:
    """The variant names the checker's report lists."""
    match = re.search(r"CPU variants present \(\d+, not checked\): (.*)", report)
    assert match, report
    return set(match[1].split(", "))


def cpu_flags() -> set[str]:
    """This CPU's feature flags from /proc/cpuinfo (Linux)."""
    text = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    line = next((row for row in text.splitlines() if row.startswith("flags")), "")
    return set(line.partition(":")[2].split())
