"""An EAGLE-3 draft file beside its target drafts (engine/llamacpp/eagle3.py drives it)."""

from __future__ import annotations

from specchat.engine.drafting.base import Listing
from specchat.engine.drafting.head import HeadDrafter
from specchat.engine.drafting.registry import register


@register
class Eagle3Drafter(HeadDrafter):
    """An EAGLE-3 draft (an `eagle3` file loaded beside its target)."""

    name = "eagle3"
    listing = Listing(label="EAGLE-3 draft", priority=17, reads_target=True)
    origin = "the EAGLE-3 draft"
    beside_target = "Eagle3Draft"
