"""Draft files that are no model of their own but a head over the target's hidden state:
which architectures they are, and how each is loaded beside its target."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from specchat.engine.llamacpp.dflash import DFLASH_ARCHITECTURE, DFlashDraft, load_dflash
from specchat.engine.llamacpp.eagle3 import EAGLE3_ARCHITECTURE, Eagle3Draft, load_eagle3
from specchat.engine.llamacpp.load import ProgressCallback
from specchat.engine.llamacpp.mtp import ASSISTANT_ARCHITECTURE, DraftHead, load_assistant

if TYPE_CHECKING:
    from specchat.engine.llamacpp.model import LlamaModel

#: A draft file loaded beside its target: a Gemma 4 assistant, an EAGLE-3 or DFlash draft.
TargetHead: TypeAlias = DraftHead | Eagle3Draft | DFlashDraft

_LOADERS: dict[str, Callable[..., TargetHead]] = {
    ASSISTANT_ARCHITECTURE: load_assistant,
    EAGLE3_ARCHITECTURE: load_eagle3,
    DFLASH_ARCHITECTURE: load_dflash,
}

#: The architectures (general.architecture) of the draft files loaded as heads.
HEAD_ARCHITECTURES = frozenset(_LOADERS)


def load_head(
    path: Path,
    architecture: str,
    target: LlamaModel,
    *,
    n_gpu_layers: int = 0,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
) -> TargetHead:
    """The draft file at `path`, of `architecture` (one of HEAD_ARCHITECTURES), loaded
    beside `target`."""
    return _LOADERS[architecture](
        path, target, n_gpu_layers=n_gpu_layers, progress=progress, cancel=cancel
    )
