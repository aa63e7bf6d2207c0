"""The heads a Qwen3.5/3.6 target or a Gemma 4 pair drafts with: the target's own MTP head (a
`nextn` layer), or a Gemma 4 assistant file beside its target (both driven by
mtp_driver.py's DraftHead)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from specchat.engine.drafting.base import Listing, LoadedPair
from specchat.engine.drafting.head import HeadDrafter
from specchat.engine.drafting.head_column import HeadColumn
from specchat.engine.drafting.registry import register

if TYPE_CHECKING:
    from specchat.engine.drafting.mtp.mtp_driver import DraftHead


@register
class MtpDrafter(HeadDrafter["DraftHead"]):
    """The target's MTP head (Qwen3.5/3.6 files with `nextn` layers)."""

    name = "mtp"
    listing = Listing(label="MTP head", priority=15, reads_target=True, columns=(HeadColumn,))
    origin = "the MTP head"

    @classmethod
    def own_head(cls, pair: LoadedPair) -> DraftHead | None:
        from specchat.engine.drafting.mtp.mtp_driver import DraftHead
        from specchat.engine.llamacpp.model import LlamaModel

        target = pair.target
        if not isinstance(target, LlamaModel) or not target.has_mtp:
            return None
        return DraftHead(target, serves=cls.name)

    @classmethod
    def weights_file(cls, pair: LoadedPair) -> Path | None:
        from specchat.engine.llamacpp.model import LlamaModel

        target = pair.target
        return target.path if isinstance(target, LlamaModel) and target.has_mtp else None


@register
class AssistantDrafter(HeadDrafter["DraftHead"]):
    """A Gemma 4 assistant (a `gemma4-assistant` file loaded beside its target)."""

    name = "assistant"
    listing = Listing(
        label="Gemma 4 assistant", priority=16, reads_target=True, columns=(HeadColumn,)
    )
    origin = "the Gemma 4 assistant"
    architecture = "gemma4-assistant"
    file_label = "assistant"

    @classmethod
    def head_class(cls) -> type[DraftHead]:
        from specchat.engine.drafting.mtp.mtp_driver import DraftHead

        return DraftHead


#: The architecture of a Gemma 4 assistant file (general.architecture).
ASSISTANT_ARCHITECTURE = AssistantDrafter.architecture
#: A Gemma 4 assistant file loaded as its target's draft head.
load_assistant = AssistantDrafter.load_beside
