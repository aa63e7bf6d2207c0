"""Linux desktop files validate, and install-desktop.sh follows the hicolor icon layout."""

from __future__ import annotations

import configparser
import os
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINUX = ROOT / "packaging" / "linux"
ICONS = ROOT / "resources" / "icons"
APP_ID = "io.github.specchat.SpecChat"
DESKTOP = LINUX / f"{APP_ID}.desktop"
METAINFO = LINUX / f"{APP_ID}.metainfo.xml"
INSTALL = LINUX / "install-desktop.sh"
PNG_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
HICOLOR_INDEX = Path("/usr/share/icons/hicolor/index.theme")


def _tool(name: str, package: str) -> str:
    # packaging/system-deps.sh installs these on every machine `make test` runs on, so a
    # missing tool is a broken set-up to fix, never a reason to skip.
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is missing: run packaging/system-deps.sh (Debian package {package})")
    return path


def _png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name} is not a PNG"
    width, height = struct.unpack(">II", header[16:24])
    return width, height


def _desktop_entry() -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    parser.read(DESKTOP, encoding="utf-8")
    return parser["Desktop Entry"]


def test_desktop_file_validates() -> None:
    done = subprocess.run(
        [_tool("desktop-file-validate", "desktop-file-utils"), str(DESKTOP)],
        capture_output=True,
        text=True,
    )
    # desktop-file-validate exits 0 with hints; errors and warnings are what matter.
    assert done.returncode == 0, done.stdout + done.stderr
    assert "error:" not in done.stdout and "warning:" not in done.stdout, done.stdout


def test_metainfo_validates() -> None:
    done = subprocess.run(
        [_tool("appstreamcli", "appstream"), "validate", "--no-net", str(METAINFO)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_desktop_and_metainfo_agree_with_the_project() -> None:
    entry = _desktop_entry()
    assert entry["Icon"] == APP_ID
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    # The menu runs the console script both pip/pipx and the bundle (dist/specchat) provide.
    assert entry["Exec"].split()[0] == "specchat"
    assert 'specchat = "specchat.__main__:main"' in pyproject

    root = ET.parse(METAINFO).getroot()
    assert root.findtext("id") == APP_ID
    assert root.findtext("launchable") == DESKTOP.name
    assert root.findtext("icon") == APP_ID
    assert root.findtext("provides/binary") == "specchat"
    versions = [release.get("version") for release in root.iterfind("releases/release")]
    assert f'version = "{versions[0]}"' in pyproject, "newest release != pyproject"
    # The screenshot URL names a file the repository really has (the URL's host is a
    # placeholder until the project is published).
    url = root.findtext("screenshots/screenshot/image") or ""
    relative = url.split("/main/", 1)[1]
    assert (ROOT / relative).is_file(), f"{relative} is missing"


def test_icons_have_their_sizes() -> None:
    for size in PNG_SIZES:
        assert _png_size(ICONS / f"specchat-{size}.png") == (size, size)
    ico = (ICONS / "specchat.ico").read_bytes()
    reserved, kind, count = struct.unpack("<HHH", ico[:6])
    assert (reserved, kind) == (0, 1) and count == 7
    icns = (ICONS / "specchat.icns").read_bytes()
    assert icns[:4] == b"icns" and struct.unpack(">I", icns[4:8])[0] == len(icns)


def _install(destdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DESTDIR": str(destdir), "PREFIX": "/usr"}
    return subprocess.run(
        ["bash", str(INSTALL), *args], capture_output=True, text=True, env=env, check=True
    )


def test_install_desktop_follows_the_hicolor_layout(tmp_path: Path) -> None:
    if not HICOLOR_INDEX.is_file():
        pytest.fail(f"{HICOLOR_INDEX} is missing: run packaging/system-deps.sh")
    index = configparser.ConfigParser(interpolation=None)
    index.read(HICOLOR_INDEX, encoding="utf-8")
    theme_dirs = set(index["Icon Theme"]["Directories"].split(","))

    _install(tmp_path)
    share = tmp_path / "usr" / "share"
    installed = {p.relative_to(share).as_posix() for p in share.rglob("*") if p.is_file()}
    expected = {
        f"applications/{APP_ID}.desktop",
        f"metainfo/{APP_ID}.metainfo.xml",
        f"icons/hicolor/scalable/apps/{APP_ID}.svg",
        *(f"icons/hicolor/{s}x{s}/apps/{APP_ID}.png" for s in PNG_SIZES),
    }
    assert installed == expected
    for size in PNG_SIZES:
        folder = f"{size}x{size}/apps"
        assert folder in theme_dirs, f"hicolor has no {folder}"
        assert index[folder]["Size"] == str(size)
        assert _png_size(share / "icons" / "hicolor" / folder / f"{APP_ID}.png") == (size, size)
    assert "scalable/apps" in theme_dirs
    assert (share / "applications" / f"{APP_ID}.desktop").read_bytes() == DESKTOP.read_bytes()
    assert not (tmp_path / "usr" / "bin").exists()

    _install(tmp_path, "--uninstall")
    assert not [p for p in share.rglob("*") if p.is_file()]


def test_install_desktop_can_install_the_bundle(tmp_path: Path) -> None:
    # Any ELF file stands in for dist/specchat; the real bundle is test_bundle's business.
    fake_bundle = Path(shutil.which("true") or "/bin/true")
    _install(tmp_path, "--bin", str(fake_bundle))
    binary = tmp_path / "usr" / "bin" / "specchat"
    assert binary.is_file() and os.access(binary, os.X_OK)
    _install(tmp_path, "--uninstall")
    assert not binary.exists()
