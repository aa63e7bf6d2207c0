"""The context size and GPU layers, with what the context costs in memory; applied on reload."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Signal, Slot
from PySide6.QtWidgets import QComboBox, QFormLayout, QHBoxLayout, QLabel, QSpinBox, QWidget

#: The context sizes offered (tokens); a saved size outside the list is added to it.
CONTEXT_SIZES = (2048, 4096, 8192, 16384, 32768)


@dataclass(frozen=True)
class GpuLayers:
    """Layers to offload (-1 = all), applied at the next load.

    Attributes:
        target: target model layers.
        draft: draft model layers.
    """

    target: int
    draft: int


#: Every layer of both models on the GPU (where there is one): the default.
ALL_LAYERS = GpuLayers(-1, -1)


def format_bytes(n: float) -> str:
    """1.5 GiB, 160 MiB, 12 KiB."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}" if n < 10 * size else f"{n / size:.0f} {unit}"
    return f"{n:.0f} B"


class MemorySection(QWidget):
    """Context size (with its KV cache cost) and GPU layers; both apply on Reload.

    Attributes:
        context_box: the context size in tokens.
        cost_label: what the chosen context costs in KV cache memory.
        target_layers, draft_layers: GPU layer spin boxes.

    Signals:
        context_changed(int): a context size was chosen.
        gpu_layers_changed(GpuLayers): a GPU layer count changed.
    """

    context_changed = Signal(int)
    gpu_layers_changed = Signal(GpuLayers)

    def __init__(
        self,
        parent: QWidget | None = None,
        *,
        n_ctx: int = 4096,
        gpu: GpuLayers = GpuLayers(-1, -1),
    ) -> None:
        super().__init__(parent)
        self._kv_bytes_per_token = 0
        self._loaded_ctx: int | None = None
        form = QFormLayout(self)
        form.setContentsMargins(12, 0, 0, 0)
        self.context_box = QComboBox()
        self.context_box.setObjectName("context_size")
        for size in sorted({*CONTEXT_SIZES, n_ctx}):
            self.context_box.addItem(f"{size:,} tokens", size)
        self.context_box.setCurrentIndex(self.context_box.findData(n_ctx))
        self.context_box.setToolTip(
            "Longest conversation the model sees at once; older turns are left out beyond it."
        )
        self.context_box.currentIndexChanged.connect(self._on_context_changed)
        form.addRow("Context", self.context_box)
        self.cost_label = QLabel("")
        self.cost_label.setObjectName("context_cost")
        form.addRow(self.cost_label)

        self.target_layers = _layers_box(gpu.target)
        self.draft_layers = _layers_box(gpu.draft)
        hint = "Layers offloaded to the GPU (“all” = every layer); changes apply on Reload."
        layers = QWidget()
        row = QHBoxLayout(layers)
        row.setContentsMargins(0, 0, 0, 0)
        for caption, spin in (("Target", self.target_layers), ("Draft", self.draft_layers)):
            spin.setToolTip(hint)
            spin.valueChanged.connect(self._on_layers_changed)
            name = QLabel(caption)
            name.setBuddy(spin)
            row.addWidget(name)
            row.addWidget(spin, 1)
        form.addRow("GPU layers", layers)
        self._refresh()

    def n_ctx(self) -> int:
        return int(self.context_box.currentData())

    def gpu_layers(self) -> GpuLayers:
        return GpuLayers(self.target_layers.value(), self.draft_layers.value())

    def set_loaded(self, *, n_ctx: int | None, kv_bytes_per_token: int) -> None:
        """The pair in use: its context and its KV bytes per token (target + draft)."""
        self._loaded_ctx = n_ctx
        self._kv_bytes_per_token = kv_bytes_per_token
        self._refresh()

    def summary(self) -> str:
        """One line for the closed section."""
        gpu = self.gpu_layers()
        layers = "" if gpu == ALL_LAYERS else f" · GPU {gpu.target}/{gpu.draft}"
        cost = self._cost()
        return f"{self.n_ctx():,} tokens" + (f" ≈ {cost}" if cost else "") + layers

    def _cost(self) -> str:
        if not self._kv_bytes_per_token:
            return ""
        return format_bytes(self.n_ctx() * self._kv_bytes_per_token)

    def _refresh(self) -> None:
        cost = self._cost()
        text = f"KV cache ≈ {cost} (target + draft)" if cost else "KV cache: known once loaded"
        if self._loaded_ctx is not None and self._loaded_ctx != self.n_ctx():
            text += " · Reload to apply"
        self.cost_label.setText(text)

    @Slot(int)
    def _on_context_changed(self, _index: int) -> None:
        self._refresh()
        self.context_changed.emit(self.n_ctx())

    @Slot(int)
    def _on_layers_changed(self, _value: int) -> None:
        self.gpu_layers_changed.emit(self.gpu_layers())


def _layers_box(value: int) -> QSpinBox:
    box = QSpinBox()
    box.setRange(-1, 999)
    box.setSpecialValueText("all")
    box.setValue(value)
    return box
