"""The heads a Qwen3.5/3.6 target or a Gemma 4 pair drafts with: the target's own MTP head (a
`nextn` layer), or a Gemma 4 assistant file beside its target."""

from __future__ import annotations

from pathlib import Path

from specchat.engine.drafting.base import Head, Listing, LoadedPair
from specchat.engine.drafting.head import HeadDrafter
from specchat.engine.drafting.registry import register


@register
class MtpDrafter(HeadDrafter):
    """The target's MTP head (Qwen3.5/3.6 files with `nextn` layers)."""

    name = "mtp"
    listing = Listing(label="MTP head", priority=15, reads_target=True)
    origin = "the MTP head"

    @classmethod
    def own_head(cls, pair: LoadedPair) -> Head | None:
        from specchat.engine.llamacpp.model import LlamaModel
        from specchat.engine.llamacpp.mtp import DraftHead

        target = pair.target
        if not isinstance(target, LlamaModel) or not target.has_mtp:
            return None
        return DraftHead(target)

    @classmethod
    def weights_file(cls, pair: LoadedPair) -> Path | None:
        from specchat.engine.llamacpp.model import LlamaModel

        target = pair.target
        return target.path if isinstance(target, LlamaModel) and target.has_mtp else None


@register
class AssistantDrafter(HeadDrafter):
    """A Gemma 4 assistant (a `gemma4-assistant` file loaded beside its target)."""

    name = "assistant"
    listing = Listing(label="Gemma 4 assistant", priority=16, reads_target=True)
    origin = "the Gemma 4 assistant"
    beside_target = "DraftHead"
