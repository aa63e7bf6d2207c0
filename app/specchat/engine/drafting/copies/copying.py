"""What the copying drafters share: acceptance learnt from every proposal, a copy carried
through the answer's substitutions, and one search per position for the offer and the draft."""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from specchat.engine.costs.priors import MAX_LOOKUP_K
from specchat.engine.drafting.base import (
    Answer,
    Draft,
    Drafter,
    LearntEstimate,
    LoadedPair,
    Offer,
    Outcome,
    through_end,
)
from specchat.engine.drafting.copies.copy_acceptance import CopyAcceptance
from specchat.engine.drafting.copies.substitutions import Source, Substitutions
from specchat.engine.drafting.copies.views import VIEW_EXTENT, Followed, Views

#: What a drafter's search found beyond its main proposal (the suffix index's runners-up).
Found = TypeVar("Found")


@dataclass(frozen=True)
class CopyDraft(Draft):
    """A copy's draft.

    Attributes:
        match_len: how far back the text agreed with where the copy came from.
    """

    match_len: int = 0


@dataclass(frozen=True)
class Search(Generic[Found]):
    """One search at one position of the text, shared by the round's offer and draft.

    Attributes:
        position: the text's length when searched.
        k: the longest proposal asked for.
        tokens: the main proposal (never past a token that ends the answer).
        match_len: the match it was found by.
        counted: the part of the match that counts as evidence (what it is priced by).
        own: whether the match lies inside the answer being written (a copy of the answer
            itself, priced apart: see CopyAcceptance.own).
        found: what else the drafter's search found.
        substitutions: this answer's substitutions, followed up to `position`: the drafter's
            own once the round is observed.
        followed: the same for the copies of its views (see Views).
        ms: the search's time.
    """

    position: int
    k: int
    tokens: tuple[int, ...]
    match_len: int
    counted: int
    own: bool
    found: Found
    substitutions: Substitutions
    ms: float
    followed: Followed


class CopyDrafter(Drafter, Generic[Found]):
    """A drafter that copies text already said (no model): lookup, the suffix index, a
    prediction.

    Since proposing is free, every proposal `auto` looks at is scored against the text that
    follows (see CopyAcceptance), drafted or not. A search is pure: the offer and the draft
    of a round share it (kept by position), and the round's `observe` takes what it learnt
    (the proposal to score, the substitutions followed).

    Every copying drafter also copies from its source as the answer may quote it (JSON-
    escaped inside a call's string argument, or unescaped: copies/views.py), where that
    copy's match is the longer: found and priced like its own copies, from one seam.

    Attributes:
        copies: acceptance by match length and by the target's certainty (learnt from
            every proposal, see CopyAcceptance).
        substitutions: this answer's substitutions, through which a copy is carried.
        views: its source respelled, escaped and unescaped (none without a tokenizer).
    """

    def __init__(
        self,
        locate: Callable[[Sequence[int]], tuple[int, int]],
        *,
        source: Source | None = None,
    ) -> None:
        """`locate` finds the text's ending where the drafter copies from: the text itself,
        or the document `source` gives (see Substitutions)."""
        super().__init__()
        self.copies = CopyAcceptance()
        self.substitutions = Substitutions(locate, source=source)
        self.views = Views(None)
        self._search: Search[Found] | None = None  # this round's, once made

    @classmethod
    def create(cls, pair: LoadedPair, built: Mapping[str, Drafter]) -> Drafter | None:
        drafter = super().create(pair, built)
        if isinstance(drafter, CopyDrafter):
            drafter.views = Views(pair.target)
        return drafter

    @abc.abstractmethod
    def _find(
        self, context: Sequence[int], k: int, substitutions: Substitutions
    ) -> tuple[tuple[int, ...], int, int, bool, Found]:
        """(proposal of up to k tokens, match length, the part of it counted, whether it
        copies the answer itself, what else was found) after `context`; `substitutions` is a
        copy of the drafter's to follow to here."""

    def _found_in_view(self, tokens: tuple[int, ...], match_len: int) -> Found:
        """What else the search found, for a copy taken from a view (see Views)."""
        raise NotImplementedError

    def _viewed_source(self, answer: Answer) -> Sequence[int]:
        """What the drafter copies from, besides the answer itself, for its views: the
        prompt (a document apart from it overrides)."""
        return answer.prompt

    def _searched(self, context: Sequence[int], k: int) -> Search[Found]:
        """The search at this position for up to k tokens: the round's, if made already."""
        search = self._search
        if search is not None and search.position == len(context) and search.k >= k:
            return search
        began = time.perf_counter()
        substitutions = self.substitutions.fork()
        tokens, match_len, counted, own, found = self._find(context, k, substitutions)
        followed = self.views.fork()
        viewed = self.views.find(context, k, VIEW_EXTENT, match_len, followed)
        if viewed is not None:
            tokens = through_end(viewed.tokens, self._ends_answer)
            match_len, own = viewed.match_len, False
            counted = self.copies.evidence(len(context), match_len)
            found = self._found_in_view(tokens, match_len)
        ms = (time.perf_counter() - began) * 1000.0
        search = Search(
            len(context), k, tokens, match_len, counted, own, found, substitutions, ms, followed
        )
        self._search = search
        return search

    #: Whether a long copy goes on into the rows a cheap pass size leaves over (see Offer).
    _fills_pass = False

    def offer(
        self, context: Sequence[int], k_cap: int, prices: Sequence[float] | None
    ) -> Offer | None:
        """The copy found here, priced by the part of its match that counts."""
        search = self._searched(context, min(k_cap, MAX_LOOKUP_K))
        if not search.tokens:
            return None
        curve = self.copies.curve(search.counted, len(search.tokens), search.own)
        return self._offer(search, curve)

    def _offer(self, search: Search[Found], curve: Sequence[float]) -> Offer:
        alpha = self.copies.alpha(search.counted, search.own)
        return Offer(
            source=self.name,
            k_max=len(curve) - 1,
            curve=curve,
            detail=f"{self._where(search)}, α ≈ {alpha:.2f}",
            fills_pass=self._fills_pass,
        )

    def _where(self, search: Search[Found]) -> str:
        """The offer's detail before its α: the match."""
        return f"{search.match_len}-token match"

    def begin(self, answer: Answer) -> None:
        """Pending proposals are void, and acceptance starts again from the priors: how
        copies fared in another answer (a code edit before an explanation) predicts little
        for this one, and the ledger relearns within a few dozen tokens."""
        self.copies.restart(len(answer.prompt))
        self.copies.sampled = not answer.sampling.greedy
        self.substitutions.restart()
        self.views.begin(self._viewed_source(answer), len(answer.prompt))
        self._search = None

    def _estimates(self) -> dict[str, LearntEstimate]:
        # Its acceptance starts again from the priors at every answer (CopyAcceptance.restart:
        # how copies fared in one answer predicts little for the next): nothing outlives one.
        return {}

    def observe(self, outcome: Outcome) -> None:
        """Learn from every proposal the text has now decided, this round's included.

        Memory is counted in tokens of text (about the last hundred), not in scores: the
        proposals made at neighbouring positions overlap and are scored many times over.
        """
        search, self._search = self._search, None
        if search is not None and search.position <= len(outcome.context):
            self.substitutions = search.substitutions
            self.views.followed = search.followed
            self.copies.note(search.position, search.tokens, search.counted, search.own)
        if outcome.sampling is not None:
            self.copies.sampled = not outcome.sampling.greedy
        self.copies.learn(outcome.context, outcome.margin, outcome.p_emitted)
