"""What the window keeps between runs: the controls, and geometry as settings text."""

from __future__ import annotations

from PySide6.QtCore import QByteArray

from specchat import settings as cfg
from specchat.engine.context import OverflowPolicy
from specchat.settings import Settings
from specchat.ui.panels.controls import ControlsPanel


def encode(data: QByteArray) -> str:
    """Qt's saved geometry or splitter state as text for the settings file."""
    return bytes(data.toBase64().data()).decode("ascii")


def decode(text: str) -> QByteArray:
    """The inverse of encode()."""
    return QByteArray.fromBase64(text.encode("ascii"))


def save_controls(settings: Settings, controls: ControlsPanel) -> None:
    """Remember mode, K, sampling, context, GPU layers and whether the advanced part is open."""
    state = controls.state()
    gpu = controls.gpu_layers()
    settings.set(cfg.MODE, state.mode)
    settings.set(cfg.K, state.k)
    settings.set(cfg.TEMPERATURE, state.sampling.temperature)
    settings.set(cfg.TOP_P, state.sampling.top_p)
    settings.set(cfg.TARGET_GPU_LAYERS, gpu.target)
    settings.set(cfg.DRAFT_GPU_LAYERS, gpu.draft)
    settings.set(cfg.ADVANCED_OPEN, controls.advanced_button.isChecked())
    settings.set(cfg.N_CTX, controls.memory.n_ctx())
    settings.set(cfg.RPC_SERVERS, controls.memory.rpc_servers())


def overflow_policy(settings: Settings) -> OverflowPolicy:
    """The context overflow policy the settings name; an unknown name drops the oldest."""
    try:
        return OverflowPolicy.from_setting(settings.get(cfg.CONTEXT_OVERFLOW))
    except ValueError:
        return OverflowPolicy.DROP_OLDEST
