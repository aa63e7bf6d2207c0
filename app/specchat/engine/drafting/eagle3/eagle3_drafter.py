"""An EAGLE-3 draft file beside its target drafts (eagle3_driver.py drives it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from specchat.engine.drafting.base import Listing
from specchat.engine.drafting.head import HeadDrafter
from specchat.engine.drafting.head_column import HeadColumn
from specchat.engine.drafting.registry import register

if TYPE_CHECKING:
    from specchat.engine.drafting.eagle3.eagle3_driver import Eagle3Draft


@register
class Eagle3Drafter(HeadDrafter["Eagle3Draft"]):
    """An EAGLE-3 draft (an `eagle3` file loaded beside its target)."""

    name = "eagle3"
    listing = Listing(label="EAGLE-3 draft", priority=17, reads_target=True, columns=(HeadColumn,))
    origin = "the EAGLE-3 draft"
    architecture = "eagle3"
    file_label = "EAGLE-3 draft"

    @classmethod
    def head_class(cls) -> type[Eagle3Draft]:
        from specchat.engine.drafting.eagle3.eagle3_driver import Eagle3Draft

        return Eagle3Draft


#: The architecture of an EAGLE-3 draft file (general.architecture).
EAGLE3_ARCHITECTURE = Eagle3Drafter.architecture
#: An EAGLE-3 draft file loaded beside its target.
load_eagle3 = Eagle3Drafter.load_beside
