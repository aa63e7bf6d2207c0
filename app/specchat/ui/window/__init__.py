"""The window itself: the application, the main window, its menus, switches, state, status line
and Settings dialog."""
