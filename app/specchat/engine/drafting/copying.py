"""What the copying drafters share: acceptance learnt from every proposal, a copy carried
through the answer's substitutions, and the offer's search kept for the round's draft."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from specchat.engine.drafting.base import Drafter, Outcome
from specchat.engine.drafting.copy_acceptance import CopyAcceptance
from specchat.engine.drafting.substitutions import Source, Substitutions
from specchat.engine.types import SamplingParams

#: What a drafter's search found, kept from its offer for its proposal in the same round.
Found = TypeVar("Found")


class CopyDrafter(Drafter, Generic[Found]):
    """A drafter that copies text (no model): lookup, the suffix index, a prediction.

    Since proposing is free, every proposal `auto` looks at is scored against the text that
    follows (see CopyAcceptance), drafted or not.

    Attributes:
        copies: acceptance by match length and by the target's certainty (learnt from
            every proposal, see CopyAcceptance).
        substitutions: this answer's substitutions, through which a copy is carried.
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
        # The last offer's (position, what its search found): the round's draft, if chosen.
        self._offered: tuple[int, Found] | None = None

    def _keep(self, context: Sequence[int], found: Found) -> None:
        self._offered = (len(context), found)

    def _kept(self, context: Sequence[int]) -> Found | None:
        """What this round's offer found, if it was made at this position."""
        offered = self._offered
        return offered[1] if offered is not None and offered[0] == len(context) else None

    def _counted(self, context: Sequence[int], tokens: Sequence[int], match_len: int) -> int:
        """The part of the match that counts as evidence; the proposal is noted to be
        scored once the text decides it."""
        counted = self.copies.evidence(len(context), match_len)
        self.copies.note(len(context), tokens, counted)
        return counted

    def use_sampling(self, sampling: SamplingParams) -> None:
        self.copies.sampled = not sampling.greedy

    def prepare(self, prompt: Sequence[int], *, eager: bool) -> None:
        """Pending proposals are void, and acceptance starts again from the priors: how
        copies fared in another answer (a code edit before an explanation) predicts little
        for this one, and the ledger relearns within a few dozen tokens."""
        self.copies.restart(len(prompt))
        self.substitutions.restart()
        self._offered = None

    def expected_tokens_curve(self, k_max: int) -> list[float]:
        """Without a match in view: the shortest matches' estimate."""
        return self.copies.curve(1, k_max)

    def observe(self, outcome: Outcome) -> None:
        """Learn from every proposal the text has now decided.

        Memory is counted in tokens of text (about the last hundred), not in scores: the
        proposals made at neighbouring positions overlap and are scored many times over.
        """
        self._offered = None
        self.copies.learn(outcome.context, outcome.margin, outcome.p_emitted)
