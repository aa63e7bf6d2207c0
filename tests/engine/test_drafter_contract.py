"""The drafter contract: a small surface, and an offer that changes nothing (the policy may ask
every drafter each round and take none of them)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from specchat.bench.live.trace import agreement
from specchat.engine.drafting import (
    Answer,
    Draft,
    Drafter,
    Drafters,
    Listing,
    LoadedPair,
    Outcome,
    auto_drafters,
)
from specchat.engine.llamacpp.model import LlamaModel
from specchat.engine.types import SamplingParams

#: Everything a drafter shows the decoder, the policies, the registry and the bench.
SURFACE = {"name", "listing", "create", "begin", "ready", "offer", "propose", "observe"}


class _Bare(Drafter):
    name = "bare"
    listing = Listing(label="Bare")

    def propose(
        self, context: Sequence[int], k: int, sampling: SamplingParams, rng: np.random.Generator
    ) -> Draft:
        return Draft((), None, 0.0, self.name)


def test_a_drafter_has_at_most_eight_public_members() -> None:
    members = {n for n in dir(Drafter) if not n.startswith("_")}
    members |= {n for n in Drafter.__annotations__ if not n.startswith("_")}
    members |= {n for n in vars(_Bare()) if not n.startswith("_")}
    assert members == SURFACE
    assert len(members) <= 8


def _plain(value: Any, depth: int = 0) -> Any:
    """`value` as plain data, for comparing a drafter's state before and after an offer."""
    if depth > 8:
        return repr(value)
    if isinstance(value, dict):
        return {repr(k): _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=repr) if isinstance(value, set | frozenset) else value
        return [_plain(v, depth + 1) for v in items]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, int | float | str | bool | type(None)):
        return value
    if callable(value) and not hasattr(value, "__dict__"):
        return repr(type(value))
    if hasattr(value, "__dict__"):
        return {k: _plain(v, depth + 1) for k, v in vars(value).items() if k != "_search"}
    return repr(value)


def _state(drafter: Drafter) -> Any:
    """What a drafter has learnt and holds, but for what it keeps aside for the round (its
    search) or remembers of the target (which tokens end an answer); a model's cache by its
    tokens. The suffix index is left out: its search reads the text said so far into it, as
    every round's `observe` does."""
    aside = ("model", "index", "_search", "_ends_answer")
    state = {k: v for k, v in vars(drafter).items() if k not in aside}
    model = getattr(drafter, "model", None)
    if isinstance(model, LlamaModel):
        state["cache"] = list(model.tokens)
    return _plain(state)


def test_an_offer_changes_nothing_and_the_draft_is_the_same_without_it(
    tiny_target: LlamaModel, tiny_draft: LlamaModel
) -> None:
    tiny_target.reset()
    tiny_draft.reset()
    prompt = tiny_target.tokenize("the cat sat on the mat. the dog sat on the hat. the cat")
    answer = tiny_target.tokenize(" sat on the mat. the dog sat on the hat. the", add_special=False)
    offered, unoffered = (
        Drafters(LoadedPair.of(tiny_target, tiny_draft)),
        Drafters(LoadedPair.of(tiny_target, tiny_draft)),
    )
    names = [d.name for d in auto_drafters(offered)]
    assert {"suffix", "draft"} <= set(names)
    names += ["lookup"]  # subsumed under auto, offered under its own mode all the same
    prices = [0.0, *(10.0 + 0.1 * n for n in range(80))]
    begin = Answer(prompt=prompt, prediction=[*prompt[-6:], *answer])
    for drafters in (offered, unoffered):
        for drafter in drafters:
            drafter.begin(begin)
    rng = np.random.default_rng(0)
    checked = 0
    for i in range(len(answer) - 1):
        context = [*prompt, *answer[:i]]
        for name in names:
            drafter, twin = offered[name], unoffered[name]
            before = _state(drafter)
            first = drafter.offer(context, 16, prices)
            assert _state(drafter) == before, (name, i)
            assert drafter.offer(context, 16, prices) == first, (name, i)
            assert _state(drafter) == before, (name, i)
            draft = drafter.propose(context, 4, SamplingParams(), rng)
            alone = twin.propose(context, 4, SamplingParams(), rng)
            assert draft.tokens == alone.tokens, (name, i)
            checked += first is not None
            # The round writes one token (its draft refused, or kept but not used here).
            written = [*context, answer[i]]
            kept = min(1, agreement(draft.tokens, answer[i:]))
            drafter.observe(Outcome(written, draft, kept))
            twin.observe(Outcome(written, alone, kept))
    assert checked > len(answer)  # offers were made, by several drafters
