"""The suffix drafter: what followed the text's ending anywhere already said — this chat
(regenerated answers included), earlier chats, attachments — chosen by how often it followed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from specchat.engine.costs.priors import MAX_LOOKUP_K
from specchat.engine.drafting.base import (
    Answer,
    Drafter,
    Listing,
    LoadedPair,
    Offer,
    Outcome,
    end_cut,
)
from specchat.engine.drafting.copies.copying import CopyDraft, CopyDrafter, Search
from specchat.engine.drafting.copies.matching import locate
from specchat.engine.drafting.copies.substitutions import Substitutions
from specchat.engine.drafting.copies.views import Views
from specchat.engine.drafting.lookup.lookup_drafter import LOOKUP_DEPTH
from specchat.engine.drafting.registry import register
from specchat.engine.drafting.trace_column import TraceColumn, agreement
from specchat.engine.suffix.index import Continuation, Source, SuffixIndex
from specchat.engine.types import SamplingParams

#: Proposals one tree pass checks at temperature 0 (the main path included).
TREE_BRANCHES = 3
#: A continuation that followed less than this share of the time ends the main path (the
#: remaining budget goes to the runners-up, as branches).
MIN_SHARE = 0.3


@dataclass(frozen=True)
class SuffixColumn(TraceColumn):
    """Per answer position, the suffix drafter's proposal over this chat: its main path's
    length, and what its best branch — or the copy carried through the answer's
    substitutions — keeps (the ceiling's optimism).

    Attributes:
        reaches: per position, the longest of its paths.
        keeps: per position, what the best of them keeps.
    """

    order = 11
    fixed = False
    max_k = LOOKUP_DEPTH - 1
    kind = "copy"

    reaches: tuple[int, ...] = ()
    keeps: tuple[int, ...] = ()

    @classmethod
    def derive(cls, name: str, prompt: Sequence[int], answer: Sequence[int]) -> SuffixColumn:
        index = SuffixIndex()
        substitutions = Substitutions(locate)
        prompt, answer = list(prompt), list(answer)
        index.prepare(prompt)
        reaches, keeps = [], []
        for i in range(len(answer)):
            context = [*prompt, *answer[:i]]
            index.sync(context)
            found_paths = index.propose(cls.max_k, branches=TREE_BRANCHES, min_share=MIN_SHARE)
            substitutions.track(context, found_paths[0].match_len if found_paths else 0)
            paths = [p.tokens for p in found_paths]
            carried = substitutions.copy(context, cls.max_k)
            if carried is not None and carried[0]:
                paths.append(carried[0])
            if not paths:
                reaches.append(0)
                keeps.append(0)
                continue
            reaches.append(max(len(path) for path in paths))
            keeps.append(max(agreement(path, answer[i:]) for path in paths))
        return cls(name, tuple(reaches), tuple(keeps))

    def kept(self, i: int, answer: Sequence[int]) -> int:
        return self.keeps[i]

    def reach(self, i: int) -> int:
        return self.reaches[i]


@register
class SuffixDrafter(CopyDrafter[list[Continuation]]):
    """Draft from a suffix index over everything already said.

    Like prompt lookup it costs no model, but it remembers more: every answer of this chat
    (a regenerated one too), the user's earlier chats and attached files; and where the text
    went on differently in different places, it proposes what followed most often, with the
    runners-up as branches of a tree checked in the same pass. Its acceptance estimate is
    lookup's (per match-length bucket, learnt at every position from the text that
    follows), scaled by how often each proposed token followed.

    Attributes:
        index: the suffix index, from its `LoadedPair`: the session's, which the session
            feeds from other threads (engine/said.py).
        copies: acceptance by match length and by the target's certainty (see
            CopyAcceptance).
    """

    name = "suffix"
    # Prompt lookup's search is one of the index's: the index finds the longest match too.
    listing = Listing(
        label="Suffix index (everything said)",
        priority=5,
        columns=(SuffixColumn,),
        subsumes=("lookup",),
    )
    _fills_pass = True  # the runners-up ride in the rows a cheap pass size leaves over

    def __init__(self, index: SuffixIndex | None = None) -> None:
        super().__init__(locate)
        self.index = index if index is not None else SuffixIndex()
        self._conversation: int | str | None = None

    @classmethod
    def create(cls, pair: LoadedPair, built: Mapping[str, Drafter]) -> Drafter | None:
        drafter = cls(pair.index)
        drafter._ends_answer = pair.ends_answer
        drafter.views = Views(pair.target)
        return drafter

    def begin(self, answer: Answer) -> None:
        """A conversation other than the last answer's: what was said there is an earlier
        chat now (the store feeds it to the index), not this one."""
        conversation = answer.conversation
        if conversation is not None and conversation != self._conversation:
            if self._conversation is not None:
                self.index.reset_chat()
            self._conversation = conversation
        self.index.prepare(answer.prompt)
        super().begin(answer)

    def _find(
        self, context: Sequence[int], k: int, substitutions: Substitutions
    ) -> tuple[tuple[int, ...], int, int, bool, list[Continuation]]:
        """The index's continuations (main path first), or a copy of this chat carried
        through this answer's substitutions where it has run longer than the index's match
        (see Substitutions): one path, every token certain."""
        self.index.sync(context)
        found = self.index.propose(k, branches=TREE_BRANCHES, min_share=MIN_SHARE)
        substitutions.track(context, found[0].match_len if found else 0)
        carried = substitutions.copy(context, k)
        own = False
        if carried is not None and carried[0] and (not found or carried[1] >= found[0].match_len):
            tokens, run = carried
            ones = (1,) * len(tokens)
            found = [Continuation(tokens, run, ones, (1.0,) * len(tokens), Source.CHAT)]
        elif found and found[0].source is Source.CHAT:
            # The index keeps where in this chat a match ended only as a count.
            own = self.copies.own_match(context, found[0].match_len)
        found = [self._through_end(c) for c in found]
        if not found:
            return (), 0, 0, False, found
        main = found[0]
        counted = self.copies.evidence(len(context), main.match_len)
        return main.tokens, main.match_len, counted, own, found

    def _found_in_view(self, tokens: tuple[int, ...], match_len: int) -> list[Continuation]:
        """A view's copy: of this chat, one path, every token certain."""
        if not tokens:
            return []
        ones = (1,) * len(tokens)
        return [Continuation(tokens, match_len, ones, (1.0,) * len(tokens), Source.CHAT)]

    def _through_end(self, found: Continuation) -> Continuation:
        """`found` cut after a token that ends the answer (see end_cut)."""
        n = end_cut(found.tokens, self._ends_answer)
        if n == len(found.tokens):
            return found
        return replace(
            found, tokens=found.tokens[:n], counts=found.counts[:n], shares=found.shares[:n]
        )

    def offer(
        self, context: Sequence[int], k_cap: int, prices: Sequence[float] | None
    ) -> Offer | None:
        search = self._searched(context, min(k_cap, MAX_LOOKUP_K))
        if not search.tokens:
            return None
        base = self.copies.curve(search.counted, len(search.tokens), search.own)
        # Each proposed token also had to be the one that follows here: its share of what
        # followed before (1.0 where the text went on one way only).
        curve = [1.0]
        reach = 1.0
        for position, share in enumerate(search.found[0].shares, start=1):
            reach *= share
            curve.append(curve[-1] + (base[position] - base[position - 1]) * reach)
        return self._offer(search, curve)

    def _where(self, search: Search[list[Continuation]]) -> str:
        return f"{search.match_len}-token match in {search.found[0].source.value}"

    def propose(
        self,
        context: Sequence[int],
        k: int,
        sampling: SamplingParams,
        rng: np.random.Generator,
    ) -> CopyDraft:
        search = self._searched(context, k)
        found = search.found
        if not found:
            return CopyDraft((), None, search.ms, self.name)
        main = found[0]
        tokens = main.tokens[:k]
        branches: list[tuple[int, ...]] = []
        if sampling.greedy:
            # The runners-up ride in the same pass within the same budget of k draft rows:
            # a branch costs only the rows it does not share with the paths before it.
            rows = {tokens[:i] for i in range(1, len(tokens) + 1)}
            for other in found[1:]:
                path = other.tokens[:k]
                new = {path[:i] for i in range(1, len(path) + 1)} - rows
                if len(rows) + len(new) > k:
                    continue
                rows |= new
                branches.append(path)
        return CopyDraft(
            tokens,
            None,
            search.ms,
            self.name,
            origin=main.source.value,
            branches=tuple(branches),
            match_len=main.match_len,
        )

    def observe(self, outcome: Outcome) -> None:
        """Index the kept text, and learn from every proposal the text has now decided."""
        super().observe(outcome)
        self.index.sync(outcome.context)
