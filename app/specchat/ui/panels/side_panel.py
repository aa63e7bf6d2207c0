"""The side panel: the drafting controls above the speculation statistics."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QScrollArea, QVBoxLayout, QWidget

from specchat import settings as cfg
from specchat.engine.drafting.registry import AUTO, mode_names
from specchat.engine.types import Controls, SamplingParams
from specchat.settings import Settings
from specchat.ui import palette as palettes
from specchat.ui.panels.controls import ControlsPanel, GpuLayers
from specchat.ui.panels.gauge import StatsPanel


def control_state(settings: Settings) -> Controls:
    """The controls as last saved, brought back into their ranges (a mode no longer
    registered becomes auto)."""
    s = settings
    mode = str(s.get(cfg.MODE)).strip().lower()
    sampling = SamplingParams(
        temperature=min(2.0, max(0.0, s.get(cfg.TEMPERATURE))),
        top_p=min(1.0, max(0.05, s.get(cfg.TOP_P))),
    )
    return Controls(mode if mode in mode_names() else AUTO, s.get(cfg.K), sampling)


class SidePanel(QScrollArea):
    """The controls and the statistics, scrolling when the window is short.

    Attributes:
        controls: mode, K, sampling, GPU layers and the pair.
        stats_panel: gauge, figures and charts of the current answer.
    """

    def __init__(
        self, *, settings: Settings, palette: palettes.Palette, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        s = settings
        self.controls = ControlsPanel(
            state=control_state(s),
            gpu=GpuLayers(s.get(cfg.TARGET_GPU_LAYERS), s.get(cfg.DRAFT_GPU_LAYERS)),
            advanced_open=s.get(cfg.ADVANCED_OPEN),
            n_ctx=max(256, s.get(cfg.N_CTX)),
            kv_cache=s.get(cfg.KV_CACHE),
        )
        self.controls.memory.set_rpc_servers(s.get(cfg.RPC_SERVERS))
        self.stats_panel = StatsPanel(palette=palette)
        side = QWidget()
        side_layout = QVBoxLayout(side)
        side_layout.setContentsMargins(6, 6, 6, 6)
        side_layout.addWidget(self.controls)
        side_layout.addWidget(self.stats_panel)
        side_layout.addStretch(1)
        self.setWidget(side)
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setMinimumWidth(300)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
