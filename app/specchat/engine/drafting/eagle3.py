"""An EAGLE-3 draft file beside its target drafts (engine/llamacpp/eagle3.py drives it)."""

from __future__ import annotations

from pathlib import Path

from specchat.engine.drafting.base import Head, Listing, LoadedPair
from specchat.engine.drafting.head import HeadDrafter
from specchat.engine.drafting.mtp import head_path
from specchat.engine.drafting.registry import register


@register
class Eagle3Drafter(HeadDrafter):
    """An EAGLE-3 draft (an `eagle3` file loaded beside its target)."""

    name = "eagle3"
    listing = Listing(label="EAGLE-3 draft", priority=17, reads_target=True)
    origin = "the EAGLE-3 draft"

    @classmethod
    def own_head(cls, pair: LoadedPair) -> Head | None:
        from specchat.engine.llamacpp.eagle3 import Eagle3Draft

        return pair.head if isinstance(pair.head, Eagle3Draft) else None

    @classmethod
    def weights_file(cls, pair: LoadedPair) -> Path | None:
        return head_path(pair, "Eagle3Draft")
