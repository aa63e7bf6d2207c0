"""The shipped stylesheets parse, take every colour from the palette, and the metadata agrees."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from PySide6.QtCore import QtMsgType, qInstallMessageHandler
from PySide6.QtWidgets import QApplication, QLineEdit, QPushButton, QSlider

from specchat import paths

STYLES = ("light", "dark")


@pytest.mark.parametrize("theme", STYLES)
def test_stylesheet_parses(theme: str, qapp: QApplication) -> None:
    messages: list[str] = []
    previous = qInstallMessageHandler(
        lambda kind, _context, text: messages.append(text) if kind != QtMsgType.QtDebugMsg else None
    )
    try:
        widgets = [QPushButton("x"), QLineEdit(), QSlider()]
        for widget in widgets:
            widget.setStyleSheet(paths.resource("style", f"{theme}.qss").read_text("utf-8"))
            widget.ensurePolished()
    finally:
        qInstallMessageHandler(previous)
    assert not [m for m in messages if "style" in m.lower() or "parse" in m.lower()], messages


@pytest.mark.parametrize("theme", STYLES)
def test_stylesheet_takes_colours_from_the_palette(theme: str) -> None:
    # House rule: colours live in specchat/ui/palette.py; a sheet only names palette roles
    # (and the translucent hover overlays no role expresses).
    text = paths.resource("style", f"{theme}.qss").read_text("utf-8")
    code = re.sub(r"/\*.*?\*/", "", text, flags=re.DOTALL)
    assert not re.findall(r"#[0-9a-fA-F]{3,8}\b", code)
    assert not re.findall(r"\brgb\(", code)


def test_app_metadata_matches_the_desktop_files() -> None:
    meta = json.loads(paths.resource("app.json").read_text("utf-8"))
    linux = Path(__file__).resolve().parents[2] / "packaging" / "linux"
    assert (linux / f"{meta['id']}.desktop").is_file()
    assert (linux / f"{meta['id']}.metainfo.xml").is_file()
    assert paths.resource(meta["icon"]).is_file()
    for sheet in meta["stylesheets"].values():
        assert paths.resource(sheet).is_file()
