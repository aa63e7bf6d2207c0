"""Live models priced like a replay: their passes take the cost table's time on a virtual
clock, so the live round loop sees the prices a replay sees and what auto learns and chooses
can be compared round by round."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specchat.bench.hindsight.recorded_target import VirtualClock
from specchat.engine.costs.machine import MachineCosts
from specchat.engine.decoding.decoder import tree_prefixes
from specchat.engine.drafting import Head
from specchat.engine.llamacpp.model import LlamaModel


class PricedModel:
    """A loaded model whose passes take the cost table's time on a virtual clock: the live
    round loop then sees the prices a replay sees, so what auto learns and chooses can be
    compared round by round."""

    def __init__(self, model: LlamaModel, costs: MachineCosts, clock: VirtualClock) -> None:
        self._model = model
        self._costs = costs
        self._clock = clock

    def __getattr__(self, name: str) -> object:
        return getattr(self._model, name)

    def decode(
        self, tokens: Sequence[int], *, logits: str = "last", copy: bool = True
    ) -> np.ndarray:
        depth = self._model.n_past
        rows = self._model.decode(tokens, logits=logits, copy=copy)
        if logits != "none":
            self._spend(len(tokens), depth)
        return rows

    def decode_tree(self, paths: Sequence[Sequence[int]]) -> list[np.ndarray]:
        depth = self._model.n_past
        rows = self._model.decode_tree(paths)
        self._spend(len(tree_prefixes(paths)), depth)
        return rows

    def _spend(self, rows: int, depth: int) -> None:
        # At the cache's depth before the pass, as the round loop prices it (RoundContext).
        ms = self._costs.target.cost_ms(rows, depth)
        assert ms is not None
        self._clock.spend(ms)


class PricedHead:
    """A live draft head whose drafted tokens take the cost table's price for the head
    drafter `name` on a virtual clock, as a replay's RecordedHead charges them."""

    def __init__(self, head: Head, name: str, costs: MachineCosts, clock: VirtualClock) -> None:
        self._head = head
        self._name = name
        self._costs = costs
        self._clock = clock

    @property
    def ready(self) -> bool:
        return self._head.ready

    def draft(self, last: int, k: int, *, min_confidence: float = 0.0) -> list[int]:
        tokens = self._head.draft(last, k, min_confidence=min_confidence)
        ms = self._costs.head_token_ms(self._name)
        assert ms is not None
        self._clock.spend(k * ms)
        return tokens
