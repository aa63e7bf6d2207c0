"""A DFlash draft file beside its target drafts (dflash_driver.py drives it). One pass
denoises its whole block, so a round drafts at most the block's masks (its driver's n_max,
which HeadDrafter reads)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

from specchat.engine.drafting.base import Listing
from specchat.engine.drafting.head import HeadDrafter
from specchat.engine.drafting.head_column import HeadColumn
from specchat.engine.drafting.registry import register

if TYPE_CHECKING:
    from specchat.engine.drafting.dflash.dflash_driver import DFlashDraft
    from specchat.engine.llamacpp.load import ProgressCallback
    from specchat.engine.llamacpp.model import LlamaModel

#: A tensor only DSpark drafts have (llama.cpp tells DSpark from DFlash by it).
DSPARK_TENSOR = "markov_w1.weight"


@register
class DFlashDrafter(HeadDrafter):
    """A DFlash draft (a `dflash` file loaded beside its target)."""

    name = "dflash"
    listing = Listing(label="DFlash draft", priority=18, reads_target=True, columns=(HeadColumn,))
    origin = "the DFlash draft"
    architecture = "dflash"

    @classmethod
    def load_beside(
        cls,
        path: Path,
        target: LlamaModel,
        *,
        n_gpu_layers: int = 0,
        progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> DFlashDraft:
        """A DFlash draft file loaded beside `target` (it has no context of its own without
        the target's: llama.cpp refuses one)."""
        from specchat.engine.drafting.dflash.dflash_driver import DFlashDraft
        from specchat.engine.llamacpp.load import ModelLoadError, load_weights
        from specchat.models.gguf_reader import validate

        if any(t.name == DSPARK_TENSOR for t in validate(path).tensors):
            raise ModelLoadError(f"{path.name} is a DSpark draft, which SpecChat cannot run")
        weights = load_weights(path, n_gpu_layers=n_gpu_layers, progress=progress, cancel=cancel)
        name = f"DFlash draft {path.name}"
        return DFlashDraft(target, weights, name=name, path=path, serves=cls.name)


#: The architecture of a DFlash draft file (general.architecture).
DFLASH_ARCHITECTURE = DFlashDrafter.architecture
#: A DFlash draft file loaded beside its target.
load_dflash = DFlashDrafter.load_beside
