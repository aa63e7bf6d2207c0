"""The side panel's controls: model pair, drafting mode, K, temperature, top-p, GPU layers."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSlider,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from specchat.engine.drafting.registry import AUTO, PLAIN, modes
from specchat.engine.types import KV_CACHES, Controls, SamplingParams
from specchat.settings import MAX_FIXED_K
from specchat.ui.panels.fixed_label import FixedLinesLabel
from specchat.ui.panels.fold import Fold
from specchat.ui.panels.memory_section import ALL_LAYERS, GpuLayers, MemorySection

__all__ = ["K_MAX", "ControlsPanel", "GpuLayers"]

#: Longest draft the K slider offers (the engine's MAX_K is larger; beyond 16 rarely pays).
K_MAX = MAX_FIXED_K
#: The temperature slider's steps per unit: 0.00–2.00 in steps of 0.01.
_TEMP_STEPS = 100
_TOP_P_STEPS = 100


class ControlsPanel(QWidget):
    """Model pair, mode, K, temperature, an Advanced fold (top-p) and GPU layers.

    Attributes:
        mode_box, k_slider, temperature_slider, top_p_slider: the controls.
        target_layers, draft_layers: GPU layer spin boxes.

    Signals:
        controls_changed(Controls): mode, K, temperature or top-p moved.
        gpu_layers_changed(GpuLayers): a GPU layer count changed (applies on reload).
        context_changed(int): a context size was chosen (applies on reload).
        models_requested(): the "Models…" button.
        reload_requested(): the "Reload" button.
        advanced_toggled(bool): the Advanced fold opened or closed.
    """

    controls_changed = Signal(Controls)
    gpu_layers_changed = Signal(GpuLayers)
    context_changed = Signal(int)
    models_requested = Signal()
    reload_requested = Signal()
    advanced_toggled = Signal(bool)

    def __init__(
        self,
        parent: QWidget | None = None,
        *,
        state: Controls | None = None,
        gpu: GpuLayers = ALL_LAYERS,
        advanced_open: bool = False,
        n_ctx: int = 4096,
        kv_cache: str = KV_CACHES[0],
    ) -> None:
        super().__init__(parent)
        state = state or Controls()
        self._policy_k: int | None = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)

        # --- model pair
        pair_box = QGroupBox("Model pair")
        pair_layout = QVBoxLayout(pair_box)
        self.pair_label = FixedLinesLabel("No model loaded", lines=2)
        self.pair_label.setObjectName("pair_label")
        self.pair_detail = FixedLinesLabel(lines=4)
        self.pair_detail.setObjectName("pair_detail")
        buttons = QHBoxLayout()
        self.models_button = QPushButton("Models…")
        self.models_button.setToolTip("Choose, download or add a target/draft pair")
        self.models_button.clicked.connect(self._on_models_clicked)
        self.reload_button = QPushButton("Reload")
        self.reload_button.setToolTip("Load the pair again (applies GPU layer changes)")
        self.reload_button.clicked.connect(self._on_reload_clicked)
        buttons.addWidget(self.models_button)
        buttons.addWidget(self.reload_button)
        pair_layout.addWidget(self.pair_label)
        pair_layout.addWidget(self.pair_detail)
        pair_layout.addLayout(buttons)
        layout.addWidget(pair_box)

        # --- drafting and sampling
        box = QGroupBox("Speculation")
        form = QFormLayout(box)
        self.mode_box = QComboBox()
        self.mode_box.setObjectName("mode")
        # Sized by a few characters, not by the longest mode's label: the panel must fit a
        # 1180-pixel window, and a label too long for the box is elided (its list shows it all).
        self.mode_box.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon
        )
        self.mode_box.setMinimumContentsLength(8)
        # The registry's modes: a drafter registered anywhere is listed (engine/drafting).
        for mode in modes():
            self.mode_box.addItem(mode.label, mode.name)
        self.mode_box.setCurrentIndex(self.mode_box.findData(state.mode))
        self.mode_box.currentIndexChanged.connect(self._on_mode_changed)
        form.addRow("Drafting", self.mode_box)

        self.k_slider = QSlider(Qt.Orientation.Horizontal)
        self.k_slider.setObjectName("k")
        self.k_slider.setRange(1, K_MAX)
        self.k_slider.setPageStep(1)
        self.k_slider.setTickPosition(QSlider.TickPosition.TicksBelow)
        self.k_slider.setValue(max(1, min(K_MAX, state.k)))
        self.k_value = QLabel()
        self.k_value.setObjectName("k_value")
        self.k_value.setMinimumWidth(34)
        # Auto's own K is shown here, beside the slider: the slider keeps the user's K.
        self.k_auto = QLabel("")
        self.k_auto.setObjectName("k_auto")
        self.k_auto.setToolTip("The K the auto policy chose for the last round")
        self.k_slider.valueChanged.connect(self._on_k_changed)
        form.addRow("K", _row(self.k_slider, self.k_value, self.k_auto))
        self.k_reason = FixedLinesLabel(lines=2)
        self.k_reason.setObjectName("k_reason")
        form.addRow(self.k_reason)

        self.temperature_slider = QSlider(Qt.Orientation.Horizontal)
        self.temperature_slider.setObjectName("temperature")
        self.temperature_slider.setRange(0, 2 * _TEMP_STEPS)
        self.temperature_slider.setPageStep(10)
        self.temperature_slider.setValue(round(state.sampling.temperature * _TEMP_STEPS))
        self.temperature_value = QLabel()
        self.temperature_value.setMinimumWidth(34)
        self.temperature_slider.valueChanged.connect(self._on_temperature_changed)
        form.addRow("Temperature", _row(self.temperature_slider, self.temperature_value))

        self.advanced_button = QToolButton()
        self.advanced_button.setText("Advanced")
        self.advanced_button.setCheckable(True)
        self.advanced_button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.advanced_button.setAutoRaise(True)
        self.advanced_button.toggled.connect(self._on_advanced_toggled)
        form.addRow(self.advanced_button)
        self.advanced = QWidget()
        advanced_form = QFormLayout(self.advanced)
        advanced_form.setContentsMargins(12, 0, 0, 0)
        self.top_p_slider = QSlider(Qt.Orientation.Horizontal)
        self.top_p_slider.setObjectName("top_p")
        self.top_p_slider.setRange(5, _TOP_P_STEPS)
        self.top_p_slider.setValue(round(state.sampling.top_p * _TOP_P_STEPS))
        self.top_p_value = QLabel()
        self.top_p_value.setMinimumWidth(34)
        self.top_p_slider.valueChanged.connect(self._on_top_p_changed)
        advanced_form.addRow("Top-p", _row(self.top_p_slider, self.top_p_value))
        form.addRow(self.advanced)
        layout.addWidget(box)

        # --- context and hardware: rarely changed, folded away so the panel fits
        self.memory = MemorySection(n_ctx=n_ctx, kv_cache=kv_cache, gpu=gpu)
        self.target_layers, self.draft_layers = self.memory.target_layers, self.memory.draft_layers
        self.memory_fold = Fold("Context and GPU", self.memory)
        self.memory.gpu_layers_changed.connect(self._on_memory_changed)
        self.memory.context_changed.connect(self._on_memory_changed)
        self.memory.kv_cache_changed.connect(self._on_memory_changed)
        layout.addWidget(self.memory_fold)

        self.advanced_button.setChecked(advanced_open)
        self._on_advanced_toggled(advanced_open)
        self._refresh_labels()
        self.memory_fold.set_summary(self.memory.summary())

    # --- state ---------------------------------------------------------------------------
    def state(self) -> Controls:
        sampling = SamplingParams(
            temperature=self.temperature_slider.value() / _TEMP_STEPS,
            top_p=self.top_p_slider.value() / _TOP_P_STEPS,
        )
        return Controls(str(self.mode_box.currentData()), self.k_slider.value(), sampling)

    def gpu_layers(self) -> GpuLayers:
        return self.memory.gpu_layers()

    def set_mode(self, mode: str) -> None:
        self.mode_box.setCurrentIndex(self.mode_box.findData(mode))

    def set_pair(self, title: str, detail: str = "") -> None:
        self.pair_label.setText(title)
        self.pair_detail.setText(detail)

    def set_available_modes(self, drafters: Sequence[str] | None) -> None:
        """Grey out the drafters the loaded pair cannot serve (None: no pair, all open).
        Auto and plain always run; a greyed mode left chosen falls back as the engine says."""
        model = self.mode_box.model()
        for row in range(self.mode_box.count()):
            name = self.mode_box.itemData(row)
            open_ = drafters is None or name in (AUTO, PLAIN) or name in drafters
            item = model.item(row)  # type: ignore[attr-defined]  # a QStandardItemModel
            item.setEnabled(open_)
            item.setToolTip("" if open_ else "The loaded pair cannot draft this way")

    def show_policy_k(self, k: int | None, reason: str = "") -> None:
        """Show the K the auto policy chose (0 = a plain round) beside the slider.

        Never written into the slider: the slider is the user's K for the fixed modes, and
        what the settings save.
        """
        self._policy_k = k
        self._refresh_labels()

    # --- slots ---------------------------------------------------------------------------
    @Slot()
    def _on_models_clicked(self) -> None:
        self.models_requested.emit()

    @Slot()
    def _on_reload_clicked(self) -> None:
        self.reload_requested.emit()

    @Slot(int)
    def _on_mode_changed(self, _index: int) -> None:
        self._refresh_labels()
        self.controls_changed.emit(self.state())

    @Slot(int)
    def _on_k_changed(self, _value: int) -> None:
        self._refresh_labels()
        if self.state().mode != AUTO:
            self.controls_changed.emit(self.state())

    @Slot(int)
    def _on_temperature_changed(self, _value: int) -> None:
        self._refresh_labels()
        self.controls_changed.emit(self.state())

    @Slot(int)
    def _on_top_p_changed(self, _value: int) -> None:
        self._refresh_labels()
        self.controls_changed.emit(self.state())

    @Slot(object)
    def _on_memory_changed(self, value: object) -> None:
        self.memory_fold.set_summary(self.memory.summary())
        if isinstance(value, GpuLayers):
            self.gpu_layers_changed.emit(value)
        elif isinstance(value, int):
            self.context_changed.emit(self.memory.n_ctx())

    def set_memory_use(
        self,
        *,
        n_ctx: int | None,
        kv_bytes_per_token: int,
        key_type: str | None = None,
        state_bytes: int = 0,
        near_ties: str = "",
    ) -> None:
        """The loaded pair's context, KV bytes per token, key type and recurrent state copies,
        for the cost shown, and where its answers can part from plain whatever the keys."""
        self.memory.set_loaded(
            n_ctx=n_ctx,
            kv_bytes_per_token=kv_bytes_per_token,
            key_type=key_type,
            state_bytes=state_bytes,
            near_ties=near_ties,
        )
        self.memory_fold.set_summary(self.memory.summary())

    @Slot(bool)
    def _on_advanced_toggled(self, open_: bool) -> None:
        self.advanced.setVisible(open_)
        self.advanced_button.setArrowType(
            Qt.ArrowType.DownArrow if open_ else Qt.ArrowType.RightArrow
        )
        self.advanced_toggled.emit(open_)

    def _refresh_labels(self) -> None:
        state = self.state()
        auto = state.mode == AUTO
        plain = state.mode == PLAIN
        # The slider and its value stay at the user's K, greyed where K does nothing.
        fixed = not auto and not plain
        self.k_slider.setEnabled(fixed)
        self.k_value.setEnabled(fixed)
        self.k_value.setText(str(state.k))
        chosen = self._policy_k
        self.k_auto.setVisible(auto)
        self.k_auto.setText(
            "auto —" if chosen is None else ("auto: plain" if chosen == 0 else f"auto: {chosen}")
        )
        if auto:
            self.k_reason.setText(
                "Auto chooses K each round; the slider keeps your K for the fixed modes."
            )
        elif plain:
            self.k_reason.setText("Drafting is off: every token is a plain target step.")
        else:
            self.k_reason.setText("Tokens drafted per round: longer pays while most are kept.")
        self.k_slider.setToolTip(self.k_reason.text())
        temp = state.sampling.temperature
        self.temperature_value.setText(f"{temp:.2f}")
        self.temperature_slider.setToolTip(
            "0 = greedy (always the most likely token)" if temp == 0 else "Higher = more varied"
        )
        self.top_p_value.setText(f"{state.sampling.top_p:.2f}")


def _row(slider: QSlider, label: QLabel, *extra: QLabel) -> QWidget:
    widget = QWidget()
    layout = QHBoxLayout(widget)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.addWidget(slider, 1)
    label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    layout.addWidget(label)
    for more in extra:
        layout.addWidget(more)
    return widget
