"""A DFlash draft file beside its target drafts (engine/llamacpp/dflash.py drives it)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from specchat.engine.drafting.base import Listing
from specchat.engine.drafting.head import HeadDrafter
from specchat.engine.drafting.registry import register

if TYPE_CHECKING:
    from specchat.engine.llamacpp.dflash import DFlashDraft


@register
class DFlashDrafter(HeadDrafter):
    """A DFlash draft (a `dflash` file loaded beside its target). One pass denoises its
    whole block, so a round drafts at most the block's masks (the head's n_max)."""

    name = "dflash"
    listing = Listing(label="DFlash draft", priority=18, reads_target=True)
    origin = "the DFlash draft"
    beside_target = "DFlashDraft"

    @property
    def k_limit(self) -> int:
        return cast("DFlashDraft", self.head).n_max
