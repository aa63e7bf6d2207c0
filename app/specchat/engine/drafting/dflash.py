"""A DFlash draft file beside its target drafts (engine/llamacpp/dflash.py drives it)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from specchat.engine.drafting.base import Drafter, Head, Listing, LoadedPair
from specchat.engine.drafting.head import HeadDrafter
from specchat.engine.drafting.mtp import head_path
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

    #: The same head as `head`, by its own type.
    block: DFlashDraft

    @property
    def k_limit(self) -> int:
        return self.block.n_max

    @classmethod
    def own_head(cls, pair: LoadedPair) -> Head | None:
        from specchat.engine.llamacpp.dflash import DFlashDraft

        return pair.head if isinstance(pair.head, DFlashDraft) else None

    @classmethod
    def weights_file(cls, pair: LoadedPair) -> Path | None:
        return head_path(pair, "DFlashDraft")

    @classmethod
    def create(cls, pair: LoadedPair, built: Mapping[str, Drafter]) -> Drafter | None:
        drafter = super().create(pair, built)
        if isinstance(drafter, DFlashDrafter):
            drafter.block = drafter.head  # type: ignore[assignment]  # a DFlashDraft here
        return drafter
