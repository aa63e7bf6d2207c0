"""The chain: prompt lookup first (free), the draft model when lookup finds nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from specchat.engine.drafting.base import Draft, Drafter, LoadedPair
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
    label = "Chain (lookup, then draft)"
    priority = 30
    needs_model = True
    # A fixed recipe: `auto` weighs lookup and the draft model on their own each round.
    in_auto = False

    def __init__(self, lookup: Drafter, model: Drafter) -> None:
        super().__init__()
        self.lookup = lookup
        self.model = model

    @classmethod
    def create(cls, pair: LoadedPair, built: Mapping[str, Drafter]) -> Drafter | None:
        if "lookup" not in built or "draft" not in built:
            return None
        return cls(built["lookup"], built["draft"])

    def prepare(self, prompt: Sequence[int], *, eager: bool) -> None:
        if eager:
            self.lookup.prepare(prompt, eager=True)
            self.model.prepare(prompt, eager=True)

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
