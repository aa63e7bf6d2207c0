"""A built wheel carries the resources and the catalog, and an installed copy finds them."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.package


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (built,) = out.glob("specchat-*.whl")
    return built


def test_wheel_contains_resources_and_catalog(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        catalog = archive.read("specchat/data/models.toml")
    for size in (16, 24, 32, 48, 64, 128, 256, 512):
        assert f"specchat/resources/icons/specchat-{size}.png" in names
    for name in ("icons/specchat.svg", "style/light.qss", "style/dark.qss", "app.json"):
        assert f"specchat/resources/{name}" in names
    # The recorded answers `specchat bench --replay` prices on any machine travel with it.
    for name in ("shipped", "everyday", "held-out"):
        assert f"specchat/bench/traces/{name}.jsonl" in names
    # The symlink in app/specchat/data is stored as the file it points to.
    assert catalog == (ROOT / "models.toml").read_bytes()


def test_installed_wheel_finds_its_resources(wheel: Path, tmp_path: Path) -> None:
    # Nested two folders deep so paths.py's source-tree probe (two levels up) finds nothing.
    site = tmp_path / "install" / "site"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(site),
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    probe = (
        "import specchat, specchat.paths as p; "
        "print(specchat.__file__); print(p.resources_dir()); print(p.catalog_path()); "
        "print(p.resource('icons', 'specchat-256.png')); print(p.resource('style', 'dark.qss'))"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    lines = [Path(line) for line in done.stdout.split()]
    assert all(path.is_relative_to(site) for path in lines), lines
    _module, resources, catalog, icon, qss = lines
    assert resources == site / "specchat" / "resources" and resources.is_dir()
    assert catalog.read_bytes() == (ROOT / "models.toml").read_bytes()
    assert icon.is_file() and qss.is_file()
