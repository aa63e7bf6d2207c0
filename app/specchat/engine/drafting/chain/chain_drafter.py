"""The chain: prompt lookup first (free), the draft model when lookup finds nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from specchat.engine.drafting.base import Draft, Drafter, Listing, LoadedPair
from specchat.engine.drafting.registry import register
from specchat.engine.types import SamplingParams


@register
class ChainDrafter(Drafter):
    """Prompt lookup first (free), the draft model when lookup finds nothing.

    It draws on the pair's own lookup and draft-model drafters, so what they learn from its
    rounds (a draft's `source` names the part that made it) is theirs.

    Attributes:
        lookup: the first choice.
        model: the fallback.
    """

    name = "chain"
    # A fixed recipe: `auto` weighs lookup and the draft model on their own each round.
    listing = Listing(
        label="Chain (lookup, then draft)", priority=30, needs_model=True, in_auto=False
    )

    def __init__(self, lookup: Drafter, model: Drafter) -> None:
        super().__init__()
        self.lookup = lookup
        self.model = model

    @classmethod
    def create(cls, pair: LoadedPair, built: Mapping[str, Drafter]) -> Drafter | None:
        if "lookup" not in built or "draft" not in built:
            return None
        drafter = cls(built["lookup"], built["draft"])
        drafter._ends_answer = pair.ends_answer
        return drafter

    def ready(self, prompt: Sequence[int]) -> None:
        """Its parts are the pair's own drafters, begun with every answer: ready both."""
        self.lookup.ready(prompt)
        self.model.ready(prompt)

    def propose(
        self,
        context: Sequence[int],
        k: int,
        sampling: SamplingParams,
        rng: np.random.Generator,
    ) -> Draft:
        draft = self.lookup.propose(context, k, sampling, rng)
        if draft.tokens:
            return draft
        second = self.model.propose(context, k, sampling, rng)
        return replace(second, ms=draft.ms + second.ms)
