"""Every colour SpecChat paints with (tokens, gauge, charts; light and dark) and the app theme."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

from specchat import paths
from specchat.engine.types import TokenKind

# The token colours and cues live in a Qt-free module so the terminal uses the same ones.
from specchat.tokenstyle import OKABE_ITO, TOKEN_ACCENTS, TOKEN_CUES, TOKEN_MEANINGS

__all__ = [
    "OKABE_ITO",
    "TOKEN_ACCENTS",
    "TOKEN_CUES",
    "TOKEN_MEANINGS",
    "Palette",
    "apply_theme",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Palette:
    """The colours of one theme.

    Attributes:
        dark: whether this is the dark variant.
        token_background: tint behind each token kind (None = no tint).
        token_accent: a saturated colour per kind (legend swatches, underlines, charts).
        ghost: rejected draft text.
        code_background: behind code blocks.
        code_border: the code block's edge.
        gauge_track: the gauge's empty arc.
        gauge_fill: the gauge's filled arc (current answer).
        gauge_marker: the conversation-rate marker.
        chart_line: acceptance-over-time line.
        chart_bar: per-position bars.
        chart_grid: chart grid lines.
        text: ordinary text on the window background.
        muted_text: secondary labels.
        error_background: the error banner.
        error_text: the error banner's text.
        info_background: the notice banner (e.g. old turns dropped).
    """

    dark: bool
    token_background: dict[TokenKind, QColor | None]
    token_accent: dict[TokenKind, QColor]
    ghost: QColor
    code_background: QColor
    code_border: QColor
    gauge_track: QColor
    gauge_fill: QColor
    gauge_marker: QColor
    chart_line: QColor
    chart_bar: QColor
    chart_grid: QColor
    text: QColor
    muted_text: QColor
    error_background: QColor
    error_text: QColor
    info_background: QColor


def _c(value: str) -> QColor:
    return QColor(value)


def _tint(accent: str, base: str, amount: float) -> QColor:
    """`amount` of `accent` over `base`: a background tint text stays readable on."""
    a, b = QColor(accent), QColor(base)
    return QColor(
        round(a.red() * amount + b.red() * (1 - amount)),
        round(a.green() * amount + b.green() * (1 - amount)),
        round(a.blue() * amount + b.blue() * (1 - amount)),
    )


def _accents() -> dict[TokenKind, QColor]:
    return {kind: _c(colour) for kind, colour in TOKEN_ACCENTS.items()}


def light() -> Palette:
    base = "#FFFFFF"
    return Palette(
        dark=False,
        token_background={
            TokenKind.ACCEPTED: _tint(OKABE_ITO["sky_blue"], base, 0.30),
            TokenKind.CORRECTED: _tint(OKABE_ITO["orange"], base, 0.38),
            TokenKind.BONUS: _tint(OKABE_ITO["bluish_green"], base, 0.28),
            TokenKind.PLAIN: None,
        },
        token_accent=_accents(),
        ghost=_c("#9A9A9A"),
        code_background=_c("#F3F4F6"),
        code_border=_c("#D0D4DA"),
        gauge_track=_c("#E3E6EA"),
        gauge_fill=_c(OKABE_ITO["blue"]),
        gauge_marker=_c(OKABE_ITO["vermillion"]),
        chart_line=_c(OKABE_ITO["blue"]),
        chart_bar=_c(OKABE_ITO["sky_blue"]),
        chart_grid=_c("#E3E6EA"),
        text=_c("#1E1E1E"),
        muted_text=_c("#5F6368"),
        error_background=_c("#FDE7D9"),
        error_text=_c("#6B2700"),
        info_background=_c("#E2F0FA"),
    )


def dark() -> Palette:
    base = "#1E1F22"
    return Palette(
        dark=True,
        token_background={
            TokenKind.ACCEPTED: _tint(OKABE_ITO["sky_blue"], base, 0.32),
            TokenKind.CORRECTED: _tint(OKABE_ITO["orange"], base, 0.38),
            TokenKind.BONUS: _tint(OKABE_ITO["bluish_green"], base, 0.38),
            TokenKind.PLAIN: None,
        },
        token_accent=_accents(),
        ghost=_c("#7C7F86"),
        code_background=_c("#2A2C30"),
        code_border=_c("#3C3F45"),
        gauge_track=_c("#3A3D42"),
        gauge_fill=_c(OKABE_ITO["sky_blue"]),
        gauge_marker=_c(OKABE_ITO["orange"]),
        chart_line=_c(OKABE_ITO["sky_blue"]),
        chart_bar=_c(OKABE_ITO["blue"]),
        chart_grid=_c("#3A3D42"),
        text=_c("#E8EAED"),
        muted_text=_c("#A0A4AB"),
        error_background=_c("#4A2412"),
        error_text=_c("#FFD9C2"),
        info_background=_c("#17344A"),
    )


def system_is_dark() -> bool:
    """Whether the application's palette is a dark one (follows the system theme)."""
    app = QGuiApplication.instance()
    if app is None:
        return False
    window = QGuiApplication.palette().color(QPalette.ColorRole.Window)
    return window.lightness() < 128


def current() -> Palette:
    """The palette matching the application's current light/dark appearance."""
    return dark() if system_is_dark() else light()


def dark_qpalette() -> QPalette:
    """A Fusion-friendly dark QPalette for when the user forces the dark theme."""
    p = QPalette()
    roles = QPalette.ColorRole
    for role, value in (
        (roles.Window, "#202124"),
        (roles.WindowText, "#E8EAED"),
        (roles.Base, "#1E1F22"),
        (roles.AlternateBase, "#26282C"),
        (roles.ToolTipBase, "#2A2C30"),
        (roles.ToolTipText, "#E8EAED"),
        (roles.Text, "#E8EAED"),
        (roles.Button, "#2A2C30"),
        (roles.ButtonText, "#E8EAED"),
        (roles.BrightText, OKABE_ITO["orange"]),
        (roles.Highlight, OKABE_ITO["blue"]),
        (roles.HighlightedText, "#FFFFFF"),
        (roles.Link, OKABE_ITO["sky_blue"]),
        (roles.PlaceholderText, "#8A8D93"),
        # The 3-D roles: QPalette() starts with a light set, which on a dark window makes
        # borders glare and disabled text (drawn in Mid) look enabled.
        (roles.Light, "#4A4D52"),
        (roles.Midlight, "#34363B"),
        (roles.Mid, "#5F6368"),
        (roles.Dark, "#17181A"),
        (roles.Shadow, "#000000"),
    ):
        p.setColor(role, QColor(value))
    p.setColor(QPalette.ColorGroup.Disabled, roles.Text, QColor("#6E7177"))
    p.setColor(QPalette.ColorGroup.Disabled, roles.ButtonText, QColor("#6E7177"))
    p.setColor(QPalette.ColorGroup.Disabled, roles.WindowText, QColor("#6E7177"))
    return p


def light_qpalette() -> QPalette:
    """A light QPalette for when the user forces the light theme."""
    p = QPalette()
    roles = QPalette.ColorRole
    for role, value in (
        (roles.Window, "#F5F6F7"),
        (roles.WindowText, "#1E1E1E"),
        (roles.Base, "#FFFFFF"),
        (roles.AlternateBase, "#F0F1F3"),
        (roles.ToolTipBase, "#FFFFF0"),
        (roles.ToolTipText, "#1E1E1E"),
        (roles.Text, "#1E1E1E"),
        (roles.Button, "#ECEDEF"),
        (roles.ButtonText, "#1E1E1E"),
        (roles.Highlight, OKABE_ITO["blue"]),
        (roles.HighlightedText, "#FFFFFF"),
        (roles.Link, OKABE_ITO["blue"]),
        (roles.PlaceholderText, "#80868B"),
    ):
        p.setColor(role, QColor(value))
    return p


#: The platform palette at start-up, restored when the theme goes back to "system".
_system_palette = None


def apply_theme(theme: str) -> None:
    """Light, dark, or the system's (Qt follows the system's colour scheme on its own)."""
    global _system_palette
    app = QApplication.instance()
    if not isinstance(app, QApplication):
        return
    if _system_palette is None:
        _system_palette = app.palette()
    hints = QGuiApplication.styleHints()
    if theme == "dark":
        app.setPalette(dark_qpalette())
    elif theme == "light":
        app.setPalette(light_qpalette())
    else:
        scheme = hints.colorScheme() if hasattr(hints, "colorScheme") else None
        if scheme == Qt.ColorScheme.Dark:
            app.setPalette(dark_qpalette())
        else:
            app.setPalette(_system_palette)
    _load_stylesheet(app)


def _load_stylesheet(app: QApplication) -> None:
    """resources/style/light.qss or dark.qss, matching the palette now in use.

    The sheets take their colours from palette roles; they differ only in shading, and the
    app looks right without them.
    """
    name = "dark.qss" if system_is_dark() else "light.qss"
    try:
        sheet = paths.resources_dir() / "style" / name
        if sheet.is_file():
            app.setStyleSheet(sheet.read_text(encoding="utf-8"))
    except OSError:
        log.info("stylesheet not loaded", exc_info=True)
