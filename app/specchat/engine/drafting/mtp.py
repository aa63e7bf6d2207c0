"""The heads of a model file draft: the target's own MTP head (a Qwen3.5/3.6 file's `nextn`
layer), or a Gemma 4 assistant file beside its target."""

from __future__ import annotations

from collections.abc import Mapping

from specchat.engine.drafting.base import Drafter, Listing, LoadedPair
from specchat.engine.drafting.head import HeadDrafter
from specchat.engine.drafting.registry import register


@register
class MtpDrafter(HeadDrafter):
    """The target's MTP head (Qwen3.5/3.6 files with `nextn` layers)."""

    name = "mtp"
    listing = Listing(label="MTP head", priority=15)
    origin = "the MTP head"

    @classmethod
    def create(cls, pair: LoadedPair, built: Mapping[str, Drafter]) -> Drafter | None:
        from specchat.engine.llamacpp.model import LlamaModel
        from specchat.engine.llamacpp.mtp import DraftHead

        target = pair.target
        if not isinstance(target, LlamaModel) or not target.has_mtp:
            return None
        drafter = cls(DraftHead(target), clock=pair.clock)
        drafter._ends_answer = pair.ends_answer
        return drafter


@register
class AssistantDrafter(HeadDrafter):
    """A Gemma 4 assistant (a `gemma4-assistant` file loaded beside its target)."""

    name = "assistant"
    listing = Listing(label="Gemma 4 assistant", priority=16)
    origin = "the Gemma 4 assistant"

    @classmethod
    def create(cls, pair: LoadedPair, built: Mapping[str, Drafter]) -> Drafter | None:
        from specchat.engine.llamacpp.mtp import DraftHead

        if not isinstance(pair.head, DraftHead):
            return None
        drafter = cls(pair.head, clock=pair.clock)
        drafter._ends_answer = pair.ends_answer
        return drafter
