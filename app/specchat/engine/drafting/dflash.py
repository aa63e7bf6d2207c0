"""A DFlash draft file beside its target drafts (engine/llamacpp/dflash.py drives it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from specchat.engine.drafting.base import Drafter, Listing, LoadedPair
from specchat.engine.drafting.head import HeadDrafter
from specchat.engine.drafting.registry import register

if TYPE_CHECKING:
    from specchat.engine.llamacpp.dflash import DFlashDraft


@register
class DFlashDrafter(HeadDrafter):
    """A DFlash draft (a `dflash` file loaded beside its target). One pass denoises its
    whole block, so a round drafts at most the block's masks (the head's n_max)."""

    name = "dflash"
    listing = Listing(label="DFlash draft", priority=18)
    origin = "the DFlash draft"

    #: The same head as `head`, by its own type.
    block: DFlashDraft

    @property
    def k_limit(self) -> int:
        return self.block.n_max

    @classmethod
    def create(cls, pair: LoadedPair, built: Mapping[str, Drafter]) -> Drafter | None:
        from specchat.engine.llamacpp.dflash import DFlashDraft

        if not isinstance(pair.head, DFlashDraft):
            return None
        drafter = cls(pair.head, clock=pair.clock)
        drafter.block = pair.head
        drafter._ends_answer = pair.ends_answer
        return drafter
