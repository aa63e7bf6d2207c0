"""The GUI entry: QApplication, theme, the main window."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QIcon
from PySide6.QtWidgets import QApplication, QMessageBox

from specchat import paths
from specchat import settings as cfg
from specchat.ui import palette as palettes

log = logging.getLogger(__name__)

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
        app.setPalette(palettes.dark_qpalette())
    elif theme == "light":
        app.setPalette(palettes.light_qpalette())
    else:
        scheme = hints.colorScheme() if hasattr(hints, "colorScheme") else None
        if scheme == Qt.ColorScheme.Dark:
            app.setPalette(palettes.dark_qpalette())
        else:
            app.setPalette(_system_palette)
    _load_stylesheet(app)


def _load_stylesheet(app: QApplication) -> None:
    """resources/style/light.qss or dark.qss, matching the palette now in use.

    The sheets take their colours from palette roles; they differ only in shading, and the
    app looks right without them.
    """
    name = "dark.qss" if palettes.system_is_dark() else "light.qss"
    try:
        sheet = paths.resources_dir() / "style" / name
        if sheet.is_file():
            app.setStyleSheet(sheet.read_text(encoding="utf-8"))
    except OSError:
        log.info("stylesheet not loaded", exc_info=True)


def _icon() -> QIcon | None:
    try:
        folder = paths.resources_dir() / "icons"
    except OSError:
        return None
    for name in ("specchat.svg", "specchat.png", "app.svg", "app.png"):
        if (folder / name).is_file():
            return QIcon(str(folder / name))
    return None


def create_application(argv: Sequence[str]) -> QApplication:
    existing = QApplication.instance()
    if isinstance(existing, QApplication):
        return existing
    app = QApplication(list(argv))
    app.setApplicationName("SpecChat")
    app.setOrganizationName("SpecChat")
    # Matches packaging/linux/io.github.specchat.SpecChat.desktop, so Wayland finds the icon.
    app.setDesktopFileName("io.github.specchat.SpecChat")
    app.setStyle("Fusion")
    icon = _icon()
    if icon is not None:
        app.setWindowIcon(icon)
    return app


def run_app(argv: Sequence[str]) -> int:
    """Open the window; returns the exit status."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    app = create_application(argv)
    settings = cfg.Settings()
    apply_theme(settings.get(cfg.THEME))

    from specchat.store.conversations import ConversationStore, StoreError
    from specchat.ui.main_window import MainWindow

    try:
        store = ConversationStore()
    except StoreError as error:
        QMessageBox.critical(
            None, "SpecChat", f"The conversation database cannot be used:\n{error}"
        )
        return 1
    if store.recovered_from is not None:
        QMessageBox.warning(
            None,
            "SpecChat",
            f"The conversation database was damaged; it was kept as {store.recovered_from} "
            "and a new one was started.",
        )
    window = MainWindow(settings=settings, store=store)
    window.show()
    try:
        return app.exec()
    finally:
        store.close()


if __name__ == "__main__":
    sys.exit(run_app(sys.argv))
