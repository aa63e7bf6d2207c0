"""The portable llama.cpp build picks a CPU variant at start and carries no stray instructions."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import llama_cpp.llama_cpp as llama_lib
import pytest

from specchat.commands import selftest
from tests.helpers.portable import (
    X86_VARIANTS,
    cpu_flags,
    portable_lib_dir,
    run_checker,
    variants_listed,
)

pytestmark = pytest.mark.package

#: Variants that use no AVX2: a CPU with AVX2 must get something better.
PRE_AVX2 = {"x64", "sse42", "sandybridge", "ivybridge", "piledriver"}
BACKEND_LINE = re.compile(
    r"ok   llama\.cpp backend: CPU kernels (\S+) \(chosen from (\d+) variants\)"
)


@pytest.fixture(scope="module")
def portable_lib() -> Path:
    return portable_lib_dir()


def _self_test(lib: Path, cwd: Path, *launcher: str, cpu: str = "") -> str:
    # llama_cpp honours LLAMA_CPP_LIB_PATH: the same Python code over the portable libraries.
    env = {**os.environ, "LLAMA_CPP_LIB_PATH": str(lib), "QT_QPA_PLATFORM": "offscreen"}
    if cpu:
        env = _as_cpu(env, cpu)
    done = subprocess.run(
        [*launcher, sys.executable, "-m", "specchat", "--self-test"],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,  # no libraries here: llama.cpp's own search of the working folder finds none
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert selftest.PASSED in done.stdout
    return done.stdout


def test_self_test_loads_the_best_variant_for_this_cpu(portable_lib: Path, tmp_path: Path) -> None:
    report = _self_test(portable_lib, tmp_path)
    match = BACKEND_LINE.search(report)
    assert match, report
    variant, count = match[1], int(match[2])
    assert variant in X86_VARIANTS and count == len(X86_VARIANTS)
    if "avx2" in cpu_flags():
        assert variant not in PRE_AVX2, report


def _qemu() -> str:
    qemu = shutil.which("qemu-x86_64")
    if qemu is None:
        pytest.fail("qemu-x86_64 is missing: run packaging/system-deps.sh (Debian qemu-user)")
    return qemu


#: OpenBLAS's name for each emulated CPU model's kernels.
OPENBLAS_CORES = {"Nehalem": "Nehalem", "SandyBridge": "Sandybridge"}


def _as_cpu(env: dict[str, str], cpu: str) -> dict[str, str]:
    """`env` for a process emulated as `cpu`: numpy's OpenBLAS told that CPU's kernels. A
    machine may force its own (OPENBLAS_CORETYPE=Haswell, for its real processor), which
    would run AVX2 kernels on the emulated CPU and stop numpy before SpecChat starts."""
    return {**env, "OPENBLAS_CORETYPE": OPENBLAS_CORES[cpu]}


@pytest.mark.parametrize(("cpu", "variant"), [("Nehalem", "sse42"), ("SandyBridge", "sandybridge")])
def test_self_test_on_an_older_cpu_model_takes_its_kernels(
    portable_lib: Path, tmp_path: Path, cpu: str, variant: str
) -> None:
    # QEMU's user-mode emulator runs the whole process as that CPU (Nehalem, 2008: SSE4.2 and
    # no AVX): an instruction it lacks, outside the variant chosen, stops it with SIGILL.
    report = _self_test(portable_lib, tmp_path, _qemu(), "-cpu", cpu, cpu=cpu)
    match = BACKEND_LINE.search(report)
    assert match and match[1] == variant, report


def _beyond_sse42() -> bool:
    """Whether this CPU has what -march=native would use past x86-64 + SSE4.2."""
    return bool({"avx", "avx2", "fma", "f16c"} & cpu_flags())


def test_the_native_build_stops_on_an_older_cpu_model(tmp_path: Path) -> None:
    # What the emulator catches: make's .venv (-march=native) as a Nehalem. A build machine
    # with nothing beyond SSE4.2 makes a native build that a Nehalem runs as well.
    env = _as_cpu({**os.environ, "QT_QPA_PLATFORM": "offscreen"}, "Nehalem")
    env.pop("LLAMA_CPP_LIB_PATH", None)
    done = subprocess.run(
        [_qemu(), "-cpu", "Nehalem", sys.executable, "-m", "specchat", "--self-test"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    if _beyond_sse42():
        assert done.returncode != 0 and "Illegal instruction" in done.stderr, done.stderr
    else:
        assert done.returncode == 0, done.stdout + done.stderr


def test_checker_passes_the_portable_libraries(portable_lib: Path) -> None:
    done = run_checker(portable_lib)
    assert done.returncode == 0, done.stdout + done.stderr
    assert variants_listed(done.stdout) == X86_VARIANTS
    assert "STRAY" not in done.stdout


def test_checker_fails_a_native_build() -> None:
    # The suite runs in make's .venv, whose llama.cpp is built with -march=native.
    native = Path(llama_lib._base_path)
    if any(native.glob("libggml-cpu-*.so")):
        pytest.fail(f"{native} holds CPU variants: the suite expects make's native .venv")
    done = run_checker(native)
    if not _beyond_sse42():
        assert done.returncode == 0, done.stdout + done.stderr
        return
    assert done.returncode == 1, done.stdout + done.stderr
    family = "AVX2" if "avx2" in cpu_flags() else "AVX"
    assert re.search(rf"STRAY: libggml-cpu\.so\S*: .*{family} \d+", done.stdout), done.stdout
