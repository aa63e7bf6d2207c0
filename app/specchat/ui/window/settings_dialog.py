"""The Settings dialog: one editor per declared setting, built from settings.REGISTRY."""

from __future__ import annotations

from typing import Any

from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QLabel,
    QLineEdit,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from specchat import settings as cfg
from specchat.engine.drafting.registry import parse_mode
from specchat.settings import REGISTRY, Setting, Settings

Editor = QCheckBox | QComboBox | QSpinBox | QDoubleSpinBox | QLineEdit

#: Group titles by key prefix ("drafting.k" is in "drafting").
GROUPS = {
    "model": "Model",
    "drafting": "Drafting",
    "sampling": "Sampling",
    "gpu": "GPU",
    "chat": "Chat",
    "view": "View",
    "window": "Window",
    "speed": "Speed",
    "api": "API (Serve API)",
}


def shown_settings() -> list[Setting[Any]]:
    """The settings people may change here: every declared one the window does not keep."""
    return [setting for setting in REGISTRY.values() if not setting.internal]


#: Labels where the key's own words would be cryptic.
LABELS = {"model.n_ctx": "Context size", "sampling.top_p": "Top-p"}


def _label(setting: Setting[Any]) -> str:
    if setting.key in LABELS:
        return LABELS[setting.key]
    name = setting.key.split(".", 1)[-1].replace("_", " ")
    return name[0].upper() + name[1:]


def make_editor(setting: Setting[Any], value: Any) -> Editor:
    """An editor for one setting, showing `value`; its tooltip is the declaration's text."""
    editor: Editor
    if setting.type is bool:
        editor = QCheckBox()
        editor.setChecked(bool(value))
    elif setting.allowed():
        editor = QComboBox()
        editor.addItems(list(setting.allowed()))
        editor.setCurrentIndex(max(0, editor.findText(str(value))))
    elif setting.type is int:
        editor = QSpinBox()
        editor.setRange(-1, 10_000_000)
        editor.setValue(int(value))
    elif setting.type is float:
        editor = QDoubleSpinBox()
        editor.setRange(*(setting.bounds or (0.0, 100.0)))
        editor.setDecimals(2)
        editor.setSingleStep(0.05)
        editor.setValue(float(value))
    else:
        editor = QLineEdit(str(value))
        if setting.secret:
            editor.setEchoMode(QLineEdit.EchoMode.PasswordEchoOnEdit)
    editor.setToolTip(f"{setting.description}\n({setting.key}, default {setting.default!r})")
    return editor


def editor_value(editor: Editor) -> Any:
    if isinstance(editor, QCheckBox):
        return editor.isChecked()
    if isinstance(editor, QComboBox):
        return editor.currentText()
    if isinstance(editor, (QSpinBox, QDoubleSpinBox)):
        return editor.value()
    return editor.text()


class SettingsDialog(QDialog):
    """Every setting settings.json holds (but the window's own bookkeeping), grouped.

    Attributes:
        settings: what is edited.
        editors: the editor of each shown setting, by key.
    """

    def __init__(self, settings: Settings, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self.setObjectName("settingsDialog")
        self.settings = settings
        self.editors: dict[str, Editor] = {}
        body = QWidget()
        body_layout = QVBoxLayout(body)
        forms: dict[str, QFormLayout] = {}
        for setting in shown_settings():
            group = setting.key.split(".", 1)[0]
            if group not in forms:
                box = QGroupBox(GROUPS.get(group, group.capitalize()))
                forms[group] = QFormLayout(box)
                body_layout.addWidget(box)
            editor = make_editor(setting, settings.get(setting))
            self.editors[setting.key] = editor
            label = QLabel(_label(setting))
            label.setToolTip(setting.description)
            label.setBuddy(editor)
            forms[group].addRow(label, editor)
            hint = QLabel(setting.description)
            hint.setWordWrap(True)
            hint.setForegroundRole(QPalette.ColorRole.PlaceholderText)  # a note, not a control
            forms[group].addRow("", hint)
        body_layout.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidget(body)
        scroll.setWidgetResizable(True)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok
            | QDialogButtonBox.StandardButton.Cancel
            | QDialogButtonBox.StandardButton.RestoreDefaults
        )
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        restore = buttons.button(QDialogButtonBox.StandardButton.RestoreDefaults)
        restore.clicked.connect(self.restore_defaults)
        note = QLabel(
            "Context size and GPU layers apply when the pair is reloaded; the API's address, "
            "port and key when Serve API is next switched on."
        )
        note.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.addWidget(scroll, 1)
        layout.addWidget(note)
        layout.addWidget(buttons)
        self.resize(560, 640)

    def restore_defaults(self) -> None:
        """Put every editor back to its setting's default (saved on OK)."""
        for setting in shown_settings():
            editor = self.editors[setting.key]
            fresh = make_editor(setting, setting.default)
            if isinstance(editor, QCheckBox):
                editor.setChecked(bool(setting.default))
            elif isinstance(editor, QComboBox):
                editor.setCurrentIndex(max(0, editor.findText(str(setting.default))))
            elif isinstance(editor, (QSpinBox, QDoubleSpinBox)):
                editor.setValue(editor_value(fresh))
            else:
                editor.setText(str(setting.default))
            fresh.deleteLater()

    def changes(self) -> dict[str, Any]:
        """The edited values that differ from the settings, by key."""
        changed = {}
        for key, editor in self.editors.items():
            setting = REGISTRY[key]
            value = editor_value(editor)
            if value != self.settings.get(setting):
                changed[key] = value
        return changed

    def save(self) -> dict[str, Any]:
        """Write the changes into the settings; returns them."""
        changed = self.changes()
        for key, value in changed.items():
            self.settings.set(REGISTRY[key], value)
        return changed


def apply_to_window(window: Any, changed: dict[str, Any]) -> None:
    """Show saved changes in the window's own controls, which would otherwise save their
    old values over them (and so that they take effect now)."""
    controls = window.controls
    setters = {
        cfg.THEME.key: lambda v: window.menus.set_theme(v),
        cfg.COLOUR_TOKENS.key: lambda v: window.menus.colour_action.setChecked(v),
        cfg.SHOW_REJECTED.key: lambda v: window.menus.ghost_action.setChecked(v),
        cfg.CONVERSATIONS_VISIBLE.key: lambda v: window.menus.list_action.setChecked(v),
        cfg.SIDE_PANEL_VISIBLE.key: lambda v: window.menus.side_action.setChecked(v),
        cfg.MODE.key: lambda v: controls.set_mode(parse_mode(v)),
        cfg.K.key: lambda v: controls.k_slider.setValue(v),
        cfg.TEMPERATURE.key: lambda v: controls.temperature_slider.setValue(round(v * 100)),
        cfg.TOP_P.key: lambda v: controls.top_p_slider.setValue(
            round(v * controls.top_p_slider.maximum())
        ),
        cfg.TARGET_GPU_LAYERS.key: lambda v: controls.memory.target_layers.setValue(v),
        cfg.DRAFT_GPU_LAYERS.key: lambda v: controls.memory.draft_layers.setValue(v),
        cfg.N_CTX.key: lambda v: _choose_context(controls.memory.context_box, v),
    }
    for key, value in changed.items():
        setter = setters.get(key)
        if setter is not None:
            setter(value)


def _choose_context(box: QComboBox, n_ctx: int) -> None:
    index = box.findData(n_ctx)
    if index < 0:
        box.addItem(f"{n_ctx:,} tokens", n_ctx)
        index = box.count() - 1
    box.setCurrentIndex(index)


def open_settings(window: Any) -> bool:
    """The dialog over `window`; on OK the changes are saved and shown; True if saved."""
    dialog = SettingsDialog(window.settings, window)
    if dialog.exec() != QDialog.DialogCode.Accepted:
        return False
    apply_to_window(window, dialog.save())
    return True
