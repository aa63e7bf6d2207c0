"""A DFlash draft file beside its target drafts (dflash_driver.py drives it). One pass
denoises its whole block, so a round drafts at most the block's masks (its driver's n_max,
which HeadDrafter reads)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from specchat.engine.drafting.base import Listing
from specchat.engine.drafting.head import HeadDrafter
from specchat.engine.drafting.head_column import HeadColumn
from specchat.engine.drafting.registry import register

if TYPE_CHECKING:
    from specchat.engine.drafting.dflash.dflash_driver import DFlashDraft

#: A tensor only DSpark drafts have (llama.cpp tells DSpark from DFlash by it).
DSPARK_TENSOR = "markov_w1.weight"


@register
class DFlashDrafter(HeadDrafter["DFlashDraft"]):
    """A DFlash draft (a `dflash` file loaded beside its target)."""

    name = "dflash"
    listing = Listing(label="DFlash draft", priority=18, reads_target=True, columns=(HeadColumn,))
    origin = "the DFlash draft"
    architecture = "dflash"
    file_label = "DFlash draft"

    @classmethod
    def head_class(cls) -> type[DFlashDraft]:
        from specchat.engine.drafting.dflash.dflash_driver import DFlashDraft

        return DFlashDraft

    @classmethod
    def check_file(cls, path: Path) -> None:
        from specchat.engine.llamacpp.load import ModelLoadError
        from specchat.models.gguf_reader import validate

        if any(t.name == DSPARK_TENSOR for t in validate(path).tensors):
            raise ModelLoadError(f"{path.name} is a DSpark draft, which SpecChat cannot run")


#: The architecture of a DFlash draft file (general.architecture).
DFLASH_ARCHITECTURE = DFlashDrafter.architecture
#: A DFlash draft file loaded beside its target.
load_dflash = DFlashDrafter.load_beside
