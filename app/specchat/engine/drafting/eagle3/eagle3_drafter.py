"""An EAGLE-3 draft file beside its target drafts (eagle3_driver.py drives it)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

from specchat.engine.drafting.base import Listing
from specchat.engine.drafting.head import HeadDrafter
from specchat.engine.drafting.head_column import HeadColumn
from specchat.engine.drafting.registry import register

if TYPE_CHECKING:
    from specchat.engine.drafting.eagle3.eagle3_driver import Eagle3Draft
    from specchat.engine.llamacpp.load import ProgressCallback
    from specchat.engine.llamacpp.model import LlamaModel


@register
class Eagle3Drafter(HeadDrafter):
    """An EAGLE-3 draft (an `eagle3` file loaded beside its target)."""

    name = "eagle3"
    listing = Listing(label="EAGLE-3 draft", priority=17, reads_target=True, columns=(HeadColumn,))
    origin = "the EAGLE-3 draft"
    architecture = "eagle3"

    @classmethod
    def load_beside(
        cls,
        path: Path,
        target: LlamaModel,
        *,
        n_gpu_layers: int = 0,
        progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Eagle3Draft:
        """An EAGLE-3 draft file loaded beside `target` (it has no context of its own
        without the target's: llama.cpp refuses one)."""
        from specchat.engine.drafting.eagle3.eagle3_driver import Eagle3Draft
        from specchat.engine.llamacpp.load import load_weights

        weights = load_weights(path, n_gpu_layers=n_gpu_layers, progress=progress, cancel=cancel)
        name = f"EAGLE-3 draft {path.name}"
        return Eagle3Draft(target, weights, name=name, path=path, serves=cls.name)


#: The architecture of an EAGLE-3 draft file (general.architecture).
EAGLE3_ARCHITECTURE = Eagle3Drafter.architecture
#: An EAGLE-3 draft file loaded beside its target.
load_eagle3 = Eagle3Drafter.load_beside
