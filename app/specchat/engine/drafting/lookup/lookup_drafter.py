"""Prompt lookup: draft by copying what followed an earlier occurrence of the text's ending."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from specchat.engine.costs.priors import MAX_LOOKUP_K
from specchat.engine.drafting.base import Listing, Offer, through_end
from specchat.engine.drafting.copies.copying import CopyDraft, CopyDrafter
from specchat.engine.drafting.copies.matching import FEW, locate
from specchat.engine.drafting.copies.substitutions import Substitutions
from specchat.engine.drafting.registry import register
from specchat.engine.drafting.trace_column import (
    Live,
    TraceColumn,
    agreement,
    read_as_verified,
    renumbered_proposals,
)
from specchat.engine.types import SamplingParams

# `locate` and its threshold live in matching.py, shared with the suffix drafter and the
# decoder; they are imported from here too.
__all__ = ["FEW", "LOOKUP_DEPTH", "LookupColumn", "PromptLookupDrafter", "locate"]


#: Longest proposal recorded: what `auto` may ask of it.
LOOKUP_DEPTH = MAX_LOOKUP_K


@dataclass(frozen=True)
class LookupColumn(TraceColumn):
    """Prompt lookup's proposals along an answer.

    Attributes:
        proposals: per position, its proposal read as far as verification reads it.
        lengths: per position, the proposal's full length.
        matches: per position, how far back its match agreed with the text.
    """

    order = 10
    max_k = LOOKUP_DEPTH - 1  # a pass of LOOKUP_DEPTH rows
    kind = "copy"
    fields: ClassVar[Mapping[str, Any]] = {"lookup": (), "lookup_len": (), "match_len": ()}

    proposals: tuple[tuple[int, ...], ...] = ()
    lengths: tuple[int, ...] = ()
    matches: tuple[int, ...] = ()

    @classmethod
    def record(
        cls, name: str, prompt: Sequence[int], answer: Sequence[int], live: Live
    ) -> LookupColumn:
        lookup = PromptLookupDrafter()
        text = [*prompt, *answer]
        proposals, lengths, matches = [], [], []
        for i in range(len(answer)):
            proposal, match = lookup.find(text[: len(prompt) + i], LOOKUP_DEPTH)
            proposals.append(read_as_verified(proposal, answer[i:]))
            lengths.append(len(proposal))
            matches.append(match)
        return cls(name, tuple(proposals), tuple(lengths), tuple(matches))

    @classmethod
    def from_record(cls, name: str, data: Mapping[str, Any]) -> LookupColumn:
        return cls(
            name,
            tuple(tuple(int(t) for t in p) for p in data["lookup"]),
            tuple(int(n) for n in data["lookup_len"]),
            tuple(int(n) for n in data["match_len"]),
        )

    def to_record(self) -> dict[str, Any]:
        return {
            "lookup": [list(p) for p in self.proposals],
            "lookup_len": list(self.lengths),
            "match_len": list(self.matches),
        }

    def list_lengths(self) -> set[int]:
        return {len(self.proposals), len(self.lengths), len(self.matches)}

    def renumbered(self, renumber: Callable[[Sequence[int]], tuple[int, ...]]) -> LookupColumn:
        return LookupColumn(
            self.name, renumbered_proposals(self.proposals, renumber), self.lengths, self.matches
        )

    def kept(self, i: int, answer: Sequence[int]) -> int:
        return agreement(self.proposals[i], answer[i:])

    def reach(self, i: int) -> int:
        return self.lengths[i]

    @property
    def lookup(self) -> tuple[tuple[int, ...], ...]:
        return self.proposals

    @property
    def lookup_len(self) -> tuple[int, ...]:
        return self.lengths

    @property
    def match_len(self) -> tuple[int, ...]:
        return self.matches


@register
class PromptLookupDrafter(CopyDrafter[None]):
    """Draft by copying: find where the text's ending occurred before and propose what followed.

    No model at all, so a draft costs microseconds; it pays where answers repeat their input
    (code edits, extraction, quoting). The occurrence that agrees with the text furthest back
    wins; among equal ones the most recent, since nearby text predicts best. Since proposing
    is free, every proposal `auto` looks at is scored against the text that follows (the
    ledger), so acceptance per match length is learnt at every position, drafted or not.

    Attributes:
        max_extent: how far back a match is followed (and the largest match length reported).
        min_extent: shortest match accepted.
        copies: acceptance by match length and by the target's certainty (learnt from
            every proposal, see CopyAcceptance).
    """

    name = "lookup"
    listing = Listing(label="Prompt lookup", priority=10, columns=(LookupColumn,))

    def __init__(self, *, max_extent: int = 64, min_extent: int = 1) -> None:
        if not 1 <= min_extent <= max_extent:
            raise ValueError("need 1 <= min_extent <= max_extent")
        super().__init__(lambda text: locate(text, max_extent))
        self.max_extent = max_extent
        self.min_extent = min_extent

    def find(self, context: Sequence[int], k: int) -> tuple[tuple[int, ...], int]:
        """(continuation of up to k tokens, match length), or ((), 0).

        The match length is how far back the text agrees with the earlier occurrence, not just
        the few tokens needed to find it: a copy that has already run for thirty tokens is far
        likelier to go on than one that agrees on a single token, and `auto` sizes its drafts
        by that.
        """
        if k <= 0:
            return (), 0
        return self._continuation(context, *locate(context, self.max_extent), k)

    def _continuation(
        self, context: Sequence[int], start: int, longest: int, k: int
    ) -> tuple[tuple[int, ...], int]:
        if longest < self.min_extent:
            return (), 0
        return tuple(int(t) for t in context[start : start + k]), longest

    def propose(
        self,
        context: Sequence[int],
        k: int,
        sampling: SamplingParams,
        rng: np.random.Generator,
    ) -> CopyDraft:
        search = self._searched(context, k)
        return CopyDraft(search.tokens[:k], None, search.ms, self.name, match_len=search.match_len)

    def _find(
        self, context: Sequence[int], k: int, substitutions: Substitutions
    ) -> tuple[tuple[int, ...], int, int, bool, None]:
        """Lookup's copy, or the live copy carried through this answer's substitutions where
        that one has run longer (see Substitutions); never past a token that ends the answer."""
        if k <= 0:
            return (), 0, 0, False, None
        start, longest = locate(context, self.max_extent)
        substitutions.track(context, longest, (start, longest))
        own = self.copies.own(start - longest)
        tokens, longest = self._continuation(context, start, longest, k)
        carried = substitutions.copy(context, k)
        if carried is not None and carried[0] and carried[1] >= longest:
            # A copy carried through a rename follows the text the answer rewrites.
            tokens, longest, own = (*carried, False)
        tokens = through_end(tokens, self._ends_answer)
        return tokens, longest, self.copies.evidence(len(context), longest), own, None

    def _found_in_view(self, tokens: tuple[int, ...], match_len: int) -> None:
        return None

    def offer_match(self, length: int, match_len: int) -> Offer:
        """The offer of a proposal of `length` tokens found by a `match_len`-token match."""
        curve = self.copies.curve(match_len, min(length, MAX_LOOKUP_K))
        detail = f"{match_len}-token match, α ≈ {self.copies.alpha(match_len):.2f}"
        return Offer(source=self.name, k_max=len(curve) - 1, curve=curve, detail=detail)
