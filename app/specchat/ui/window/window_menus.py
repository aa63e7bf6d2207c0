"""The window's menu bar: its actions, and signals saying which one was chosen."""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, Signal, Slot
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QMenuBar

#: The theme menu's entries: setting value and label.
THEMES = (("system", "Follow system"), ("light", "Light"), ("dark", "Dark"))


class WindowMenus(QObject):
    """File, Edit, Chat, View and Models menus, built into a window's menu bar.

    Attributes:
        new_action, send_action, stop_action, regenerate_action: enabled as the window allows.
        settings_action: File → Settings…, the dialog over the window (its parent).
        colour_action, ghost_action, list_action, side_action: checkable view toggles.

    Signals:
        new_requested(): File → New chat.
        export_requested(str): File → Export, with "md" or "json".
        quit_requested(): File → Quit.
        copy_requested(bool): Edit → Copy answer, True for Markdown, False for plain text.
        send_requested(), stop_requested(), regenerate_requested(): the Chat menu.
        theme_chosen(str): View → Theme, with "system", "light" or "dark".
        models_requested(), reload_requested(): the Models menu.
    """

    new_requested = Signal()
    export_requested = Signal(str)
    quit_requested = Signal()
    copy_requested = Signal(bool)
    send_requested = Signal()
    stop_requested = Signal()
    regenerate_requested = Signal()
    theme_chosen = Signal(str)
    models_requested = Signal()
    reload_requested = Signal()

    def __init__(self, menu: QMenuBar, *, theme: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        file_menu = menu.addMenu("&File")
        self.new_action = file_menu.addAction("&New chat", lambda: self.new_requested.emit())
        self.new_action.setShortcut(QKeySequence.StandardKey.New)
        file_menu.addSeparator()
        file_menu.addAction("Export as &Markdown…", lambda: self.export_requested.emit("md"))
        file_menu.addAction("Export as &JSON…", lambda: self.export_requested.emit("json"))
        file_menu.addSeparator()
        self.settings_action = file_menu.addAction("Se&ttings…", self._on_settings_triggered)
        self.settings_action.setShortcut(QKeySequence.StandardKey.Preferences)
        file_menu.addSeparator()
        quit_action = file_menu.addAction("&Quit", lambda: self.quit_requested.emit())
        quit_action.setShortcut(QKeySequence.StandardKey.Quit)

        edit = menu.addMenu("&Edit")
        edit.addAction("Copy answer as &Markdown", lambda: self.copy_requested.emit(True))
        edit.addAction("Copy answer as &plain text", lambda: self.copy_requested.emit(False))

        chat = menu.addMenu("&Chat")
        self.send_action = chat.addAction("&Send", lambda: self.send_requested.emit())
        self.stop_action = chat.addAction("S&top", lambda: self.stop_requested.emit())
        self.stop_action.setShortcut(QKeySequence(Qt.Key.Key_Escape))
        self.stop_action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        self.regenerate_action = chat.addAction(
            "&Regenerate", lambda: self.regenerate_requested.emit()
        )
        self.regenerate_action.setShortcut(QKeySequence("Ctrl+R"))
        chat.addSeparator()
        self.think_action = chat.addAction("&Think before answering")
        self.think_action.setCheckable(True)
        self.think_action.setShortcut(QKeySequence("Ctrl+T"))
        self.think_action.setEnabled(False)  # until a model whose template has the switch

        view = menu.addMenu("&View")
        self.colour_action = view.addAction("&Colour tokens")
        self.colour_action.setCheckable(True)
        self.ghost_action = view.addAction("Show &rejected drafts")
        self.ghost_action.setCheckable(True)
        view.addSeparator()
        self.list_action = view.addAction("Conversation &list")
        self.list_action.setCheckable(True)
        self.side_action = view.addAction("Side &panel")
        self.side_action.setCheckable(True)
        view.addSeparator()
        theme_menu = view.addMenu("&Theme")
        self._theme_group = QActionGroup(self)
        for key, label in THEMES:
            action = QAction(label, self._theme_group, checkable=True)
            action.setData(key)
            action.setChecked(key == theme)
            self._theme_group.addAction(action)
            theme_menu.addAction(action)
        self._theme_group.triggered.connect(self._on_theme_triggered)

        models = menu.addMenu("&Models")
        models.addAction("&Models…", lambda: self.models_requested.emit())
        models.addAction("&Reload pair", lambda: self.reload_requested.emit())

    def set_theme(self, theme: str) -> None:
        """Check `theme`'s entry and emit theme_chosen, as choosing it in the menu does."""
        for action in self._theme_group.actions():
            action.setChecked(action.data() == theme)
        self.theme_chosen.emit(theme)

    @Slot(QAction)
    def _on_theme_triggered(self, action: QAction) -> None:
        self.theme_chosen.emit(str(action.data()))

    @Slot()
    def _on_settings_triggered(self) -> None:
        # Imported on demand, as the picker is: the window starts without it.
        from specchat.ui.window.settings_dialog import open_settings

        open_settings(self.parent())
