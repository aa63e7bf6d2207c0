"""The context size, the key cache, GPU layers and other machines' RPC servers, with what the
context costs in memory; applied on reload."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Signal, Slot
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QSizePolicy,
    QSpinBox,
    QWidget,
)

from specchat.engine.llamacpp.rpc_wire import last_servers, parse_endpoints
from specchat.engine.types import KV_CACHES

#: The context sizes offered (tokens); a saved size outside the list is added to it.
CONTEXT_SIZES = (2048, 4096, 8192, 16384, 32768)
#: Each key cache's name in the box, and what choosing it does (settings' model.kv_cache).
CACHE_LABELS = {"q8_0": "Q8_0 keys", "f16": "F16 keys"}
CACHE_EFFECTS = {
    "q8_0": "Speculative answers equal plain ones exactly, at half the key memory; plain "
    "can differ from stock llama.cpp at a near-tie.",
    "f16": "Plain answers equal stock llama.cpp's; a speculative one can part from plain "
    "at a near-tie.",
}


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
        cache_box: how a CPU context stores keys (KV_CACHES), with `cache_note` its effect.
        cost_label: what the chosen context costs in KV cache memory.
        target_layers, draft_layers: GPU layer spin boxes.
        rpc_edit: other machines' RPC servers the target spreads over ("HOST:PORT, …"), with
            `rpc_note` what the last load found on them (each one's free memory).

    Signals:
        context_changed(int): a context size was chosen.
        kv_cache_changed(str): a key cache was chosen (one of KV_CACHES).
        gpu_layers_changed(GpuLayers): a GPU layer count changed.
    """

    context_changed = Signal(int)
    kv_cache_changed = Signal(str)
    gpu_layers_changed = Signal(GpuLayers)

    def __init__(
        self,
        parent: QWidget | None = None,
        *,
        n_ctx: int = 4096,
        kv_cache: str = KV_CACHES[0],
        gpu: GpuLayers = GpuLayers(-1, -1),
    ) -> None:
        super().__init__(parent)
        self._kv_bytes_per_token = 0
        self._state_bytes = 0
        self._near_ties = ""
        self._loaded_ctx: int | None = None
        self._loaded_keys: str | None = None
        self._loaded_cache: str | None = None
        form = QFormLayout(self)
        form.setContentsMargins(12, 0, 0, 0)
        # A row too wide for a narrow panel puts its field under its label, never past the
        # window's edge.
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.WrapLongRows)
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
        self.cache_box = QComboBox()
        self.cache_box.setObjectName("kv_cache")
        for cache in KV_CACHES:
            self.cache_box.addItem(CACHE_LABELS[cache], cache)
        self.cache_box.setCurrentIndex(max(0, self.cache_box.findData(kv_cache)))
        self.cache_box.setToolTip("How a CPU context stores keys (a GPU keeps F16 keys).")
        self.cache_box.currentIndexChanged.connect(self._on_cache_changed)
        form.addRow("Key cache", self.cache_box)
        self.cache_note = QLabel("")
        self.cache_note.setObjectName("kv_cache_effect")
        self.cache_note.setWordWrap(True)
        # Wrapped to the panel's width, never widening it.
        self.cache_note.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        form.addRow(self.cache_note)
        self.cost_label = QLabel("")
        self.cost_label.setObjectName("context_cost")
        self.cost_label.setWordWrap(True)
        self.cost_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
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
        self.rpc_edit = QLineEdit()
        self.rpc_edit.setObjectName("rpc_servers")
        self.rpc_edit.setPlaceholderText("none: this machine alone")
        self.rpc_edit.setToolTip(
            "Other machines running `specchat rpc-server`, as HOST:PORT separated by commas: "
            "the target's layers spread over them in proportion to their free memory, the "
            "draft stays here. Checked on Reload. Serve only on a network you trust."
        )
        self.rpc_edit.textEdited.connect(self._on_rpc_edited)
        form.addRow("RPC servers", self.rpc_edit)
        self.rpc_note = QLabel("")
        self.rpc_note.setObjectName("rpc_servers_found")
        self.rpc_note.setWordWrap(True)
        self.rpc_note.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        form.addRow(self.rpc_note)
        self._loaded_rpc: str | None = None
        self._refresh()

    def n_ctx(self) -> int:
        return int(self.context_box.currentData())

    def kv_cache(self) -> str:
        return str(self.cache_box.currentData())

    def gpu_layers(self) -> GpuLayers:
        return GpuLayers(self.target_layers.value(), self.draft_layers.value())

    def rpc_servers(self) -> str:
        return self.rpc_edit.text().strip()

    def set_rpc_servers(self, servers: str) -> None:
        self.rpc_edit.setText(servers)
        self._refresh()

    def set_loaded(
        self,
        *,
        n_ctx: int | None,
        kv_bytes_per_token: int,
        key_type: str | None = None,
        state_bytes: int = 0,
        near_ties: str = "",
    ) -> None:
        """The pair in use: its context, its KV bytes per token (target + draft), how its
        target's cache stores keys ("Q8_0" or "F16"), what a recurrent or hybrid model's
        state copies take besides (llama.cpp's snapshots, SpecChat's checkpoints) and where
        its answers can part from plain at a near-tie whatever the keys (LoadInfo.near_ties)."""
        self._loaded_ctx = n_ctx
        self._kv_bytes_per_token = kv_bytes_per_token
        self._state_bytes = state_bytes
        self._near_ties = near_ties
        self._loaded_keys = key_type
        # What the pair was loaded with is what the box said when it was asked for.
        self._loaded_cache = self.kv_cache() if n_ctx is not None else None
        self._loaded_rpc = self.rpc_servers() if n_ctx is not None else None
        self._refresh()

    def summary(self) -> str:
        """One line for the closed section."""
        gpu = self.gpu_layers()
        layers = "" if gpu == ALL_LAYERS else f" · GPU {gpu.target}/{gpu.draft}"
        cost = self._cost()
        servers = len(self._endpoints())
        rpc = f" · {servers} RPC server{'s' if servers > 1 else ''}" if servers else ""
        return f"{self.n_ctx():,} tokens" + (f" ≈ {cost}" if cost else "") + layers + rpc

    def _cost(self) -> str:
        if not self._kv_bytes_per_token:
            return ""
        return format_bytes(self.n_ctx() * self._kv_bytes_per_token + self._state_bytes)

    def _refresh(self) -> None:
        cost = self._cost()
        text = f"KV cache ≈ {cost} (target + draft)" if cost else "KV cache: known once loaded"
        if cost and self._state_bytes:
            text += f", {format_bytes(self._state_bytes)} of it recurrent state copies"
        context_moved = self._loaded_ctx is not None and self._loaded_ctx != self.n_ctx()
        if context_moved or self._cache_moved():
            text += " · Reload to apply"
        self.cost_label.setText(text)
        loaded = f" Loaded: {self._loaded_keys} keys." if self._loaded_keys else ""
        effect = CACHE_EFFECTS[self.kv_cache()]
        if self._near_ties:
            effect = self._near_ties  # the target's own reason, whatever the keys
        self.cache_note.setText(effect + loaded)
        self.rpc_note.setText(self._rpc_text())
        self.rpc_note.setVisible(bool(self.rpc_note.text()))

    def _endpoints(self) -> tuple[str, ...]:
        try:
            return parse_endpoints(self.rpc_servers())
        except ValueError:
            return ()

    def _rpc_text(self) -> str:
        servers = self.rpc_servers()
        try:
            parse_endpoints(servers)
        except ValueError as error:
            return f"Not a server list: {error}"
        if self._loaded_rpc is None or servers != self._loaded_rpc:
            return "Reload to apply (each server is checked then)" if servers else ""
        found = {s.endpoint: s for s in last_servers()}
        return "\n".join(found[e].describe() if e in found else e for e in parse_endpoints(servers))

    def _cache_moved(self) -> bool:
        # Compared with the choice, not the key type: a GPU context (and a model whose heads
        # Q8_0 blocks do not divide) keeps F16 keys whatever is chosen.
        return self._loaded_cache is not None and self._loaded_cache != self.kv_cache()

    @Slot(int)
    def _on_cache_changed(self, _index: int) -> None:
        self._refresh()
        self.kv_cache_changed.emit(self.kv_cache())

    @Slot(int)
    def _on_context_changed(self, _index: int) -> None:
        self._refresh()
        self.context_changed.emit(self.n_ctx())

    @Slot(str)
    def _on_rpc_edited(self, _text: str) -> None:
        self._refresh()

    @Slot(int)
    def _on_layers_changed(self, _value: int) -> None:
        self.gpu_layers_changed.emit(self.gpu_layers())


def _layers_box(value: int) -> QSpinBox:
    box = QSpinBox()
    box.setRange(-1, 999)
    box.setSpecialValueText("all")
    box.setValue(value)
    return box
