"""The suffix drafter: what followed the text's ending anywhere already said — this chat
(regenerated answers included), earlier chats, attachments — chosen by how often it followed."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from specchat.engine.drafting.base import (
    MAX_LOOKUP_K,
    Draft,
    Offer,
    Outcome,
    end_cut,
)
from specchat.engine.drafting.copying import CopyDrafter
from specchat.engine.drafting.matching import locate
from specchat.engine.drafting.registry import register
from specchat.engine.suffix_index import Continuation, Source, SuffixIndex
from specchat.engine.types import SamplingParams

#: Proposals one tree pass checks at temperature 0 (the main path included).
TREE_BRANCHES = 3
#: A continuation that followed less than this share of the time ends the main path (the
#: remaining budget goes to the runners-up, as branches).
MIN_SHARE = 0.3


@register
class SuffixDrafter(CopyDrafter[tuple[list[Continuation], float]]):
    """Draft from a suffix index over everything already said.

    Like prompt lookup it costs no model, but it remembers more: every answer of this chat
    (a regenerated one too), the user's earlier chats and attached files; and where the text
    went on differently in different places, it proposes what followed most often, with the
    runners-up as branches of a tree checked in the same pass. Its acceptance estimate is
    lookup's (per match-length bucket, learnt at every position from the text that
    follows), scaled by how often each proposed token followed.

    Attributes:
        index: the suffix index (the stored history feeds it from another thread).
        copies: acceptance by match length and by the target's certainty (see
            CopyAcceptance).
    """

    name = "suffix"
    label = "Suffix index (everything said)"
    priority = 5
    # Prompt lookup's search is one of the index's: the index finds the longest match too.
    subsumes = ("lookup",)
    fills_pass = True  # the runners-up ride in the rows a cheap pass size leaves over

    def __init__(self, index: SuffixIndex | None = None) -> None:
        super().__init__(locate)
        self.index = index or SuffixIndex()
        self._conversation: int | str | None = None

    def enter_conversation(self, conversation: int | str) -> None:
        """Another conversation than the last answer's: what was said there is an earlier
        chat now (the store feeds it to the index), not this one."""
        if conversation != self._conversation:
            if self._conversation is not None:
                self.index.reset_chat()
            self._conversation = conversation

    def prepare(self, prompt: Sequence[int], *, eager: bool) -> None:
        self.index.prepare(prompt)
        super().prepare(prompt, eager=eager)

    def _find(self, context: Sequence[int], k: int) -> tuple[list[Continuation], float]:
        began = time.perf_counter()
        self.index.sync(context)
        found = self.index.propose(k, branches=TREE_BRANCHES, min_share=MIN_SHARE)
        # A copy of this chat carried through this answer's substitutions, where it has run
        # longer than the index's match (see Substitutions): one path, every token certain.
        self.substitutions.track(context, found[0].match_len if found else 0)
        carried = self.substitutions.copy(context, k)
        if carried is not None and carried[0] and (not found or carried[1] >= found[0].match_len):
            tokens, run = carried
            ones = (1,) * len(tokens)
            found = [Continuation(tokens, run, ones, (1.0,) * len(tokens), Source.CHAT)]
        return [self._through_end(c) for c in found], (time.perf_counter() - began) * 1000.0

    def _through_end(self, found: Continuation) -> Continuation:
        """`found` cut after a token that ends the answer (see end_cut)."""
        n = end_cut(found.tokens, self.ends_answer)
        if n == len(found.tokens):
            return found
        return replace(
            found, tokens=found.tokens[:n], counts=found.counts[:n], shares=found.shares[:n]
        )

    def offer(self, context: Sequence[int], k_cap: int) -> Offer | None:
        found, ms = self._find(context, min(k_cap, MAX_LOOKUP_K))
        self._keep(context, (found, ms))
        if not found:
            return None
        main = found[0]
        counted = self._counted(context, main.tokens, main.match_len)
        base = self.copies.curve(counted, len(main.tokens))
        # Each proposed token also had to be the one that follows here: its share of what
        # followed before (1.0 where the text went on one way only).
        curve = [1.0]
        reach = 1.0
        for position, share in enumerate(main.shares, start=1):
            reach *= share
            curve.append(curve[-1] + (base[position] - base[position - 1]) * reach)
        alpha = self.copies.alpha(counted)
        detail = f"{main.match_len}-token match in {main.source.value}, α ≈ {alpha:.2f}"
        return Offer(len(curve) - 1, curve, detail=detail)

    def propose(
        self,
        context: Sequence[int],
        k: int,
        sampling: SamplingParams,
        rng: np.random.Generator,
    ) -> Draft:
        offered = self._kept(context)
        found, ms = offered if offered is not None else self._find(context, k)
        if not found:
            return Draft((), None, ms, self.name)
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
        return Draft(
            tokens,
            None,
            ms,
            self.name,
            main.match_len,
            origin=main.source.value,
            branches=tuple(branches),
        )

    def observe(self, outcome: Outcome) -> None:
        """Index the kept text, and learn from every proposal the text has now decided."""
        super().observe(outcome)
        self.index.sync(outcome.context)
