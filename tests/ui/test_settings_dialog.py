"""The Settings dialog: built from the declarations, saved on OK, shown in the window at once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDoubleSpinBox,
    QLineEdit,
    QSpinBox,
)
from pytestqt.qtbot import QtBot

from specchat import settings as cfg
from specchat.settings import REGISTRY, Settings
from specchat.ui.window import settings_dialog
from specchat.ui.window.settings_dialog import SettingsDialog

Maker = Callable[..., Any]


def test_every_setting_but_the_window_s_own_has_an_editor_of_its_type(
    qtbot: QtBot, make_window: Maker
) -> None:
    window = make_window()
    dialog = SettingsDialog(window.settings, window)
    qtbot.addWidget(dialog)
    shown = {key for key, s in REGISTRY.items() if not s.internal}
    assert set(dialog.editors) == shown
    assert cfg.WINDOW_GEOMETRY.key not in dialog.editors  # bookkeeping, not a setting to edit
    assert isinstance(dialog.editors[cfg.CALIBRATE_PLAIN.key], QCheckBox)
    assert isinstance(dialog.editors[cfg.MAX_TOKENS.key], QSpinBox)
    assert isinstance(dialog.editors[cfg.TEMPERATURE.key], QDoubleSpinBox)
    overflow = dialog.editors[cfg.CONTEXT_OVERFLOW.key]
    assert isinstance(overflow, QComboBox) and overflow.currentText() == "drop_oldest"
    assert cfg.MAX_TOKENS.description in dialog.editors[cfg.MAX_TOKENS.key].toolTip()
    # The API's key is masked (shown while it is edited); its address is plain text.
    key = dialog.editors[cfg.API_KEY.key]
    assert isinstance(key, QLineEdit)
    assert key.echoMode() == QLineEdit.EchoMode.PasswordEchoOnEdit
    host = dialog.editors[cfg.API_HOST.key]
    assert isinstance(host, QLineEdit) and host.text() == "127.0.0.1"
    assert host.echoMode() == QLineEdit.EchoMode.Normal


def test_ok_saves_the_changes_and_the_window_shows_them(
    qtbot: QtBot, make_window: Maker, monkeypatch: pytest.MonkeyPatch
) -> None:
    window = make_window()

    def edit(dialog: SettingsDialog) -> int:  # a modal loop would block the test
        dialog.editors[cfg.MAX_TOKENS.key].setValue(77)  # type: ignore[union-attr]
        dialog.editors[cfg.TEMPERATURE.key].setValue(0.5)  # type: ignore[union-attr]
        dialog.editors[cfg.THEME.key].setCurrentText("dark")  # type: ignore[union-attr]
        dialog.editors[cfg.CALIBRATE_PLAIN.key].setChecked(False)  # type: ignore[union-attr]
        return int(QDialog.DialogCode.Accepted)

    monkeypatch.setattr(SettingsDialog, "exec", edit)
    window.menus.settings_action.trigger()
    stored = Settings()
    assert stored.get(cfg.MAX_TOKENS) == 77
    assert stored.get(cfg.CALIBRATE_PLAIN) is False
    assert stored.get(cfg.THEME) == "dark"
    assert (
        window.controls.state().sampling.temperature == 0.5
    )  # not overwritten by the slider at close
    window.save_settings()
    assert Settings().get(cfg.TEMPERATURE) == 0.5
    window.menus.set_theme("light")


def test_cancel_changes_nothing(qtbot: QtBot, make_window: Maker) -> None:
    window = make_window()
    dialog = SettingsDialog(window.settings, window)
    qtbot.addWidget(dialog)
    dialog.editors[cfg.MAX_TOKENS.key].setValue(5)  # type: ignore[union-attr]
    dialog.reject()
    assert Settings().get(cfg.MAX_TOKENS) == cfg.MAX_TOKENS.default
    dialog.restore_defaults()
    assert dialog.changes() == {}
    assert settings_dialog.shown_settings()
