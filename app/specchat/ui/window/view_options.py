"""The window's switches, kept in the settings: token colours, rejected drafts, panels, theme,
and whether a model thinks before it answers."""

from __future__ import annotations

from PySide6.QtCore import QObject, Slot
from PySide6.QtGui import QGuiApplication

from specchat import settings as cfg
from specchat.settings import Settings
from specchat.ui import palette as palettes
from specchat.ui.chat.chat_pane import ChatPane, set_checked_quietly
from specchat.ui.panels.conversation_list import ConversationList
from specchat.ui.panels.side_panel import SidePanel
from specchat.ui.window.window_menus import WindowMenus


class ViewOptions(QObject):
    """The window's view switches, each saved as it changes and its controls kept in step.

    Token colours, rejected drafts and thinking each have a menu action and a check box under
    the transcript (Think only where the loaded template has a thinking switch); the
    conversation list and the side panel a menu action each; the theme is the View menu's
    choice and, for "system", follows the desktop's light or dark.

    Attributes:
        palette: the colours in use.
    """

    def __init__(
        self,
        *,
        settings: Settings,
        menus: WindowMenus,
        chat_pane: ChatPane,
        side_panel: SidePanel,
        conversation_list: ConversationList,
        palette: palettes.Palette,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.settings = settings
        self.palette = palette
        self._menus = menus
        self._chat_pane = chat_pane
        self._side_panel = side_panel
        self._conversation_list = conversation_list
        menus.colour_action.setChecked(chat_pane.chat_view.colouring)
        menus.ghost_action.setChecked(chat_pane.chat_view.show_rejected)
        menus.colour_action.toggled.connect(self._on_colouring_toggled)
        chat_pane.colour_check.toggled.connect(self._on_colouring_toggled)
        menus.ghost_action.toggled.connect(self._on_ghosts_toggled)
        chat_pane.ghost_check.toggled.connect(self._on_ghosts_toggled)
        think = settings.get(cfg.THINK)
        menus.think_action.setChecked(think)
        chat_pane.think_check.setChecked(think)
        menus.think_action.toggled.connect(self._on_think_toggled)
        chat_pane.think_check.toggled.connect(self._on_think_toggled)
        menus.list_action.toggled.connect(self._on_list_toggled)
        menus.side_action.toggled.connect(self._on_side_toggled)
        menus.theme_chosen.connect(self._on_theme_chosen)
        hints = QGuiApplication.styleHints()
        if hasattr(hints, "colorSchemeChanged"):
            hints.colorSchemeChanged.connect(self._on_color_scheme_changed)

    def restore(self) -> None:
        """Show the conversation list and the side panel as the settings say."""
        self._menus.list_action.setChecked(self.settings.get(cfg.CONVERSATIONS_VISIBLE))
        self._menus.side_action.setChecked(self.settings.get(cfg.SIDE_PANEL_VISIBLE))
        self._conversation_list.setVisible(self.settings.get(cfg.CONVERSATIONS_VISIBLE))
        self._side_panel.setVisible(self.settings.get(cfg.SIDE_PANEL_VISIBLE))

    def follow_application_palette(self) -> None:
        """The application's palette changed: recolour what SpecChat paints itself if the
        system switched between light and dark."""
        if palettes.current().dark != self.palette.dark:
            self._apply_palette()

    @Slot(bool)
    def _on_colouring_toggled(self, on: bool) -> None:
        set_checked_quietly(self._menus.colour_action, on)
        self._chat_pane.set_colouring(on)
        self.settings.set(cfg.COLOUR_TOKENS, on)

    @Slot(bool)
    def _on_ghosts_toggled(self, on: bool) -> None:
        set_checked_quietly(self._menus.ghost_action, on)
        self._chat_pane.set_show_rejected(on)
        self.settings.set(cfg.SHOW_REJECTED, on)

    def offer_thinking(self, offered: bool) -> None:
        """Show the Think switch where the loaded model's template has one."""
        self._chat_pane.think_check.setVisible(offered)
        self._menus.think_action.setEnabled(offered)

    def thinking(self) -> bool | None:
        """The Think switch, or None where the loaded template has none."""
        if not self._menus.think_action.isEnabled():
            return None
        return self._menus.think_action.isChecked()

    @Slot(bool)
    def _on_think_toggled(self, on: bool) -> None:
        set_checked_quietly(self._menus.think_action, on)
        set_checked_quietly(self._chat_pane.think_check, on)
        self.settings.set(cfg.THINK, on)

    @Slot(bool)
    def _on_list_toggled(self, on: bool) -> None:
        self._conversation_list.setVisible(on)
        self.settings.set(cfg.CONVERSATIONS_VISIBLE, on)

    @Slot(bool)
    def _on_side_toggled(self, on: bool) -> None:
        self._side_panel.setVisible(on)
        self.settings.set(cfg.SIDE_PANEL_VISIBLE, on)

    @Slot(str)
    def _on_theme_chosen(self, theme: str) -> None:
        self.settings.set(cfg.THEME, theme)
        palettes.apply_theme(theme)
        self._apply_palette()

    @Slot(object)
    def _on_color_scheme_changed(self, _scheme: object) -> None:
        if self.settings.get(cfg.THEME) == "system":
            palettes.apply_theme("system")
            self._apply_palette()

    def _apply_palette(self) -> None:
        self.palette = palettes.current()
        self._chat_pane.set_palette(self.palette)
        self._side_panel.stats_panel.set_palette(self.palette)
