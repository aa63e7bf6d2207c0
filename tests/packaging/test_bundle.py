"""The one-file bundle `make package` ships builds, passes its self-test, has no stray code."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from specchat.commands import selftest
from tests.helpers.portable import X86_VARIANTS, package_python, run_checker, variants_listed

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "packaging" / "pyinstaller" / "specchat.spec"

pytestmark = pytest.mark.package


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """dist/specchat as `make package` builds it, into a temporary folder (75 s on 2 cores).

    The packaging environment's Python runs PyInstaller, so the bundle carries its portable
    llama.cpp, as the shipped one does.
    """
    python = package_python()
    work = tmp_path_factory.mktemp("pyinstaller")
    started = time.monotonic()
    done = subprocess.run(
        [
            str(python),
            "-m",
            "PyInstaller",
            "--noconfirm",
            "--log-level",
            "WARN",
            "--distpath",
            str(work / "dist"),
            "--workpath",
            str(work / "build"),
            str(SPEC),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    binary = work / "dist" / "specchat"
    assert binary.is_file()
    size_mb = binary.stat().st_size / 2**20
    print(f"bundle built in {time.monotonic() - started:.0f} s, {size_mb:.0f} MiB")
    return binary


def _self_test(binary: Path, home: Path, *launcher: str, platform: str) -> str:
    env = {
        **os.environ,
        "QT_QPA_PLATFORM": platform,
        "SPECCHAT_HOME": str(home),
        # The bundle must not lean on the checkout or the virtual environment.
        "PYTHONPATH": "",
        "PYTHONHOME": "",
    }
    done = subprocess.run(
        [*launcher, str(binary), "--self-test"],
        capture_output=True,
        text=True,
        env=env,
        cwd=home,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_bundle_self_test_offscreen(bundle: Path, tmp_path: Path) -> None:
    report = _self_test(bundle, tmp_path, platform="offscreen")
    assert report.startswith(selftest.HEADER) and "(frozen bundle)" in report
    # Resources and the catalog come from inside the bundle, not the source tree.
    assert "/specchat/resources" in report and str(ROOT) not in report
    assert "ok   draft mode (K=3) matches plain" in report
    assert "ok   lookup mode (K=3) matches plain" in report
    # The CPU kernels come from the variants inside the bundle, chosen for this CPU.
    match = re.search(
        r"ok   llama\.cpp backend: CPU kernels (\S+) \(chosen from (\d+) variants\)", report
    )
    assert match and match[1] in X86_VARIANTS and int(match[2]) == len(X86_VARIANTS), report
    assert "platform offscreen, icon rendered" in report
    assert selftest.PASSED in report


def test_bundle_self_test_on_x11(bundle: Path, tmp_path: Path) -> None:
    # The xcb plugin and its libraries are what a real desktop session loads.
    xvfb_run = shutil.which("xvfb-run")
    if xvfb_run is None:
        pytest.fail("xvfb-run is missing: run packaging/system-deps.sh (Debian package xvfb)")
    report = _self_test(bundle, tmp_path, xvfb_run, "-a", platform="xcb")
    assert "platform xcb, icon rendered" in report
    assert selftest.PASSED in report


def test_bundle_runs_a_subcommand(bundle: Path, tmp_path: Path) -> None:
    # Subcommands are imported by name; analysis alone would have left them out.
    env = {**os.environ, "SPECCHAT_HOME": str(tmp_path), "PYTHONPATH": ""}
    done = subprocess.run(
        [str(bundle), "models", "list"], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "default" in done.stdout


def test_bundle_has_no_instructions_beyond_sse42_outside_the_cpu_variants(bundle: Path) -> None:
    done = run_checker(bundle)
    assert done.returncode == 0, done.stdout + done.stderr
    assert variants_listed(done.stdout) == X86_VARIANTS
    print(done.stdout)


def test_bundle_version_names_the_cpu_kernels(bundle: Path, tmp_path: Path) -> None:
    env = {**os.environ, "SPECCHAT_HOME": str(tmp_path), "PYTHONPATH": ""}
    done = subprocess.run(
        [str(bundle), "--version"], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"llama-cpp-python [\d.]+: CPU kernels \w+ \(chosen from", done.stdout)
