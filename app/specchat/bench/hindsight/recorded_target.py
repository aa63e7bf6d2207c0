"""The target played back from a trace, so the decoder's own round loop replays an answer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specchat.bench.live.trace import AnswerTrace
from specchat.engine.costs.machine import MachineCosts
from specchat.engine.drafting.recorded import RecordedCache, VirtualClock, agreement_of
from specchat.engine.llamacpp.model import MAX_BRANCHES

__all__ = ["RecordedPlacement", "RecordedTarget", "VirtualClock"]

#: The margin a row ranks the answer's token by where the trace recorded none: wide, so that
#: no drafter reads it as a near tie.
UNRECORDED_MARGIN = 10.0


@dataclass(frozen=True)
class RecordedPlacement:
    """Where the recorded target's layers ran, as the cost file says (LoadInfo's one field
    the round loop reads).

    Attributes:
        gpu_layers: layers on a GPU (0: the CPU).
    """

    gpu_layers: int


class RecordedTarget(RecordedCache):
    """The target on one recorded answer, answering what the decoder's round loop asks.

    After the prompt and any prefix of the answer, its logits rank the answer's next token
    first, by the target's recorded margin there, so greedy verification keeps what the live
    run kept; after text the answer never wrote they rank a token no answer holds. Each pass
    costs the cost table's price for its rows, at the cache's depth, on the replay's clock
    (the decoder times its passes by that clock). A prompt read costs nothing: plain reads
    the same prompt.

    Attributes:
        info: where its layers ran (the cost file's GPU or CPU).
        n_vocab: rows of logits: the trace's tokens (numbered densely) and one no answer holds.
        n_ctx: room for the prompt, the answer and any draft.
        tokens: what its cache holds.
    """

    can_rollback = True
    max_branches = MAX_BRANCHES

    def __init__(
        self, trace: AnswerTrace, costs: MachineCosts, clock: VirtualClock, *, n_vocab: int
    ) -> None:
        self._text = [*trace.prompt_tokens, *trace.answer]
        self._start = len(trace.prompt_tokens)
        self._margins = trace.margins
        self._costs = costs
        self._clock = clock
        super().__init__()
        self.info = RecordedPlacement(gpu_layers=1 if costs.target.gpu else 0)
        self.n_vocab = n_vocab
        self.n_ctx = len(self._text) + 1024
        self.path = Path(trace.prompt)
        self._tree: list[list[int]] = []

    def room(self) -> int:
        return self.n_ctx - len(self.tokens)

    def follow(self, follower: object) -> None:
        """A draft head follows this cache: no tree passes, as LlamaModel.follow (a head
        reads the hidden state of each kept token in order)."""
        self.max_branches = 1

    def is_eog(self, token: int) -> bool:
        return False  # a recorded answer ends at its length

    def piece(self, token: int) -> bytes:
        return b""

    def decode(
        self, tokens: Sequence[int], *, logits: str = "last", copy: bool = True
    ) -> np.ndarray:
        if not tokens:
            raise ValueError("nothing to decode")
        first = len(self.tokens)
        self.tokens.extend(int(t) for t in tokens)
        if logits == "none":
            return np.zeros((0, self.n_vocab))
        self._spend(len(tokens), first)
        if logits == "last":
            first = len(self.tokens) - 1
        return self._rows(self.tokens, first)

    def decode_tree(self, paths: Sequence[Sequence[int]]) -> list[np.ndarray]:
        nodes = {tuple(path[: i + 1]) for path in paths for i in range(len(path))}
        self._spend(len(nodes), len(self.tokens))
        self._tree = [list(path) for path in paths]
        return [self._rows([*self.tokens, *path], len(self.tokens)) for path in paths]

    def keep_path(self, path: int, n_keep: int) -> None:
        self.tokens.extend(self._tree[path][:n_keep])
        self._tree = []

    def _spend(self, rows: int, depth: int) -> None:
        """Spend a pass of `rows` after `depth` cached tokens on the clock."""
        ms = self._costs.target.cost_ms(rows, depth)
        if ms is None:
            raise ValueError(f"the cost table prices no pass of {rows} rows")
        self._clock.spend(ms)

    def _rows(self, text: Sequence[int], first: int) -> np.ndarray:
        """Logits after text[: end] for every end past `first`."""
        agree = agreement_of(text, self._text)
        out = np.zeros((len(text) - first, self.n_vocab))
        for row, end in enumerate(range(first + 1, len(text) + 1)):
            i = end - self._start
            if end <= agree and 0 <= i < len(self._text) - self._start:
                margin = UNRECORDED_MARGIN if self._margins is None else self._margins[i]
                out[row, self._text[end]] = max(margin, 1e-6)
            else:
                out[row, self.n_vocab - 1] = UNRECORDED_MARGIN
        return out
