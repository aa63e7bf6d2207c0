"""An EAGLE-3 draft file beside its target drafts (engine/llamacpp/eagle3.py drives it)."""

from __future__ import annotations

from collections.abc import Mapping

from specchat.engine.drafting.base import Drafter, Listing, LoadedPair
from specchat.engine.drafting.head import HeadDrafter
from specchat.engine.drafting.registry import register


@register
class Eagle3Drafter(HeadDrafter):
    """An EAGLE-3 draft (an `eagle3` file loaded beside its target)."""

    name = "eagle3"
    listing = Listing(label="EAGLE-3 draft", priority=17)
    origin = "the EAGLE-3 draft"

    @classmethod
    def create(cls, pair: LoadedPair, built: Mapping[str, Drafter]) -> Drafter | None:
        from specchat.engine.llamacpp.eagle3 import Eagle3Draft

        if not isinstance(pair.head, Eagle3Draft):
            return None
        drafter = cls(pair.head, clock=pair.clock)
        drafter._ends_answer = pair.ends_answer
        return drafter
