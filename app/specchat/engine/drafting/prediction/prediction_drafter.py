"""Predicted Outputs: draft by copying the text a request says the answer will mostly repeat
(an editor's file before its edit), from wherever the answer's ending occurs in it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specchat.engine.drafting.base import Answer, Listing, Outcome, through_end
from specchat.engine.drafting.copies.copying import CopyDraft, CopyDrafter, Search
from specchat.engine.drafting.copies.matching import locate_in
from specchat.engine.drafting.copies.substitutions import Substitutions
from specchat.engine.drafting.registry import register
from specchat.engine.types import SamplingParams

#: How far back a match is followed (and the largest match length reported), as lookup's.
MAX_EXTENT = 64
__all__ = ["ANCHORED", "ORIGIN", "PredictionDrafter", "locate_in"]

#: Where the kept tokens came from, for the answer's stats ("prediction").
ORIGIN = "a prediction"
#: The match length a copy anchored at the prediction's start is priced as, however short:
#: before the answer's first token, and while the answer has followed the prediction from
#: its first token. A prediction is sent as the answer's expected text, so that is where a
#: copy of it most likely begins (an edit's file). Such a copy is at most twice as long as
#: its match (ANCHOR_FIRST before the first token), and once one is refused in an answer the
#: anchor counts no more there: a wrong guess costs one short pass per answer.
ANCHORED = 16
ANCHOR_FIRST = 4


@register
class PredictionDrafter(CopyDrafter[bool]):
    """Draft from a request's prediction: what followed the answer's ending there.

    No model, so a draft costs microseconds. Its acceptance is learnt as lookup's is, at
    every position, drafted or not (CopyDrafter): a prediction the answer follows is priced
    up within a few tokens, and one it does not follow (unrelated text) is priced down as
    fast, so `auto` stops asking the target to check it. A rename the answer makes at one
    place in the prediction is carried to the next (Substitutions), as lookup's copies are.
    What its search finds beyond the copy: whether it is anchored at the prediction's start
    (see ANCHORED).
    """

    name = "prediction"
    # The request's own hint first on ties.
    listing = Listing(label="Predicted output (API requests)", priority=4)
    _fills_pass = True  # a long copy goes on into the rows a cheap pass size leaves over

    def __init__(self) -> None:
        super().__init__(
            lambda text: locate_in(self._document, text, MAX_EXTENT),
            source=lambda text: self._listed,
        )
        self._document = np.zeros(0, dtype=np.int64)
        self._listed: tuple[int, ...] = ()  # the same tokens, for Substitutions' slices
        self._answer_start = 0
        self._anchor = True
        self._anchored_draft = False  # the round's draft was anchored (see ANCHORED)

    def begin(self, answer: Answer) -> None:
        super().begin(answer)
        self._document = np.asarray(answer.prediction, dtype=np.int64)
        self._listed = tuple(int(t) for t in answer.prediction)
        self._answer_start = len(answer.prompt)
        self._anchor = True  # until an anchored copy is refused (see ANCHORED)

    def _viewed_source(self, answer: Answer) -> Sequence[int]:
        return answer.prediction

    def _found_in_view(self, tokens: tuple[int, ...], match_len: int) -> bool:
        return False  # a view's copy is never anchored at the prediction's start

    def find(self, context: Sequence[int], k: int) -> tuple[tuple[int, ...], int]:
        """(continuation of up to k tokens from the prediction, match length), or ((), 0)."""
        tokens, match_len, _ = self._copy(context, k, self.substitutions.fork())
        return tokens, match_len

    def _find(
        self, context: Sequence[int], k: int, substitutions: Substitutions
    ) -> tuple[tuple[int, ...], int, int, bool, bool]:
        """The prediction is given text: its copies are never the answer's own."""
        tokens, match_len, anchored = self._copy(context, k, substitutions)
        if anchored:
            # Counted ANCHORED long, sampling or not: the prediction is no earlier sample.
            return tokens, match_len, max(match_len, ANCHORED), False, True
        return tokens, match_len, self.copies.evidence(len(context), match_len), False, False

    def _copy(
        self, context: Sequence[int], k: int, substitutions: Substitutions
    ) -> tuple[tuple[int, ...], int, bool]:
        """The continuation, its match length, and whether it is anchored at the
        prediction's start (see ANCHORED); `substitutions` is followed to here."""
        if k <= 0 or not self._document.size:
            return (), 0, False
        if len(context) <= self._answer_start:
            if not self._anchor:
                return (), 0, False
            start, longest, anchored = 0, 0, True  # nothing written yet
        else:
            start, longest = locate_in(self._document, context, MAX_EXTENT)
            substitutions.track(context, longest, (start, longest))
            carried = substitutions.copy(context, k)
            if carried is not None and carried[0] and carried[1] >= longest:
                # The copy carried through this answer's renames has run longer.
                return through_end(carried[0], self._ends_answer), carried[1], False
            if start < 0:
                return (), 0, False
            # The match begins at the prediction's first token.
            anchored = self._anchor and start == longest
        if anchored and longest < ANCHORED:
            k = min(k, max(ANCHOR_FIRST, 2 * longest))
        tokens = self._listed[start : start + k]
        return through_end(tokens, self._ends_answer), longest, anchored

    def _where(self, search: Search[bool]) -> str:
        where = "the start of the prediction" if search.found else "the prediction"
        return f"{search.match_len}-token match at {where}"

    def propose(
        self,
        context: Sequence[int],
        k: int,
        sampling: SamplingParams,
        rng: np.random.Generator,
    ) -> CopyDraft:
        search = self._searched(context, k)
        tokens = search.tokens[:k]
        self._anchored_draft = search.found and bool(tokens)
        origin = ORIGIN if tokens else ""
        return CopyDraft(tokens, None, search.ms, self.name, origin, match_len=search.match_len)

    def observe(self, outcome: Outcome) -> None:
        """Learn from every proposal the text has now decided; an anchored copy refused
        ends the anchor for this answer."""
        draft = outcome.draft
        if (
            draft.source == self.name
            and self._anchored_draft
            and outcome.accepted < len(draft.tokens)
        ):
            self._anchor = False
        self._anchored_draft = False
        super().observe(outcome)
