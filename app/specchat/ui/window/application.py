"""The GUI entry: QApplication, theme, the main window."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QApplication, QMessageBox

from specchat import paths
from specchat import settings as cfg
from specchat.ui.palette import apply_theme
from specchat.ui.window.gc_guard import GuiThreadCollector

log = logging.getLogger(__name__)

#: Seconds to wait at exit for a worker still inside a llama.cpp call after the window closed.
EXIT_WAIT_S = 120.0


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
    app = existing if isinstance(existing, QApplication) else _new_application(argv)
    if not app.findChildren(GuiThreadCollector):
        # Parented to the application, so it lives exactly as long as Qt objects can exist.
        GuiThreadCollector(app)
    return app


def _new_application(argv: Sequence[str]) -> QApplication:
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
    from specchat.ui.window.main_window import MainWindow

    try:
        store = ConversationStore()
    except StoreError as error:
        QMessageBox.critical(
            None, "SpecChat", f"The conversation database cannot be used:\n{error}"
        )
        return 1
    window = MainWindow(settings=settings, store=store)
    if store.recovery:
        # A notice in the window, not a modal dialog: a start nobody watches must not wait
        # for a click (the store has also said it on stderr and in its log).
        window.banner.show_message(store.recovery, kind="info", palette=window.palette_)
    window.show()
    try:
        return app.exec()
    finally:
        # The window waited a bounded time for the worker, but a llama.cpp call cannot be
        # interrupted and may run longer. Qt aborts the process when a running QThread is
        # destroyed, so wait for it here, with the window already gone.
        stopped = window.service.wait_stopped(timeout_s=EXIT_WAIT_S)
        store.close()
        if not stopped:
            # Everything is committed and the settings are saved: leave without the
            # interpreter's teardown, which would destroy the running thread and abort.
            log.error("the worker thread did not stop within %.0f s; exiting now", EXIT_WAIT_S)
            logging.shutdown()
            os._exit(0)


if __name__ == "__main__":
    sys.exit(run_app(sys.argv))
