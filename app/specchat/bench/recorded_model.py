"""A draft model played back from a trace: what a model-running drafter reads, at recorded cost."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from specchat.bench.recorded_target import RecordedCache, VirtualClock
from specchat.bench.trace import AnswerTrace
from specchat.engine.costs.table import MachineCosts


class RecordedModel(RecordedCache):
    """The pair's draft model on one recorded answer, for the real drafters that run it.

    It answers what they ask of a model (`sync`, `cached_prefix`, `truncate`, `decode`):
    after the prompt and any part of the answer, its logits rank first the token the draft
    model chose there, with the probability it gave it (both recorded at temperature 0).
    After text the answer never wrote (a draft past its first miss) the live choice is not
    known: it proposes a token no answer holds, so such a draft is never kept, with the
    confidence the draft model had there live where the trace recorded it (after its own
    choice at a miss: `AnswerTrace.draft_past_miss`), and with full confidence where it did
    not (the costlier guess: the draft goes on). Its time is the cost table's, on a clock of its
    own that the drafters time themselves by (a replay's, shared with its target): a decode of
    one or two tokens costs a drafted token, a longer one (a catch-up) the table's catch-up
    rate and then one drafted token.

    Attributes:
        path: the prompt's id (where a message names the model's file).
        n_ctx: room for any context a drafter may hand it.
        tokens: what its cache holds.
        read_ms: time spent reading a prompt (a decode asking for no logits: readying
            before an answer's first round, outside every round's time).
        catchup_ms: time spent catching up inside drafts (the part of a decode of more than
            two tokens beyond its one drafted token): what the replay's loss ledger calls
            one-off.
    """

    can_rollback = True

    def __init__(
        self,
        trace: AnswerTrace,
        costs: MachineCosts,
        *,
        clock: VirtualClock | None = None,
        n_vocab: int | None = None,
    ) -> None:
        """`n_vocab`: rows of logits, the last one a token no answer holds (by default one
        past the trace's highest token id)."""
        if trace.draft is None:
            raise ValueError("the trace holds no draft-model record")
        super().__init__()
        self._text = [*trace.prompt_tokens, *trace.answer]
        self._start = len(trace.prompt_tokens)
        self._choice = [proposal[0] if proposal else -1 for proposal in trace.draft]
        self._confidence = trace.draft_confidence
        self._past_miss = trace.draft_past_miss
        self._n_vocab = n_vocab or max([*self._text, *self._choice, 0]) + 2
        self._unseen = self._n_vocab - 1  # a token no answer holds
        self._costs = costs
        self._clock = clock or VirtualClock()
        self.path = Path(trace.prompt)
        self.n_ctx = len(self._text) + 1024
        self.read_ms = 0.0
        self.catchup_ms = 0.0

    def clock(self) -> float:
        """Seconds on its clock (what its decodes, and the target's on a shared one, cost)."""
        return self._clock()

    def decode(self, tokens: Sequence[int], *, logits: str = "last") -> np.ndarray:
        if not tokens:
            raise ValueError("nothing to decode")
        token_ms = self._costs.draft_token_ms or 0.0
        catchup = self._costs.catchup_ms(len(tokens)) if len(tokens) > 2 else 0.0
        self._clock.spend(catchup + token_ms)
        if logits == "none":
            self.read_ms += catchup + token_ms
        else:
            self.catchup_ms += catchup
        first = len(self.tokens)
        self.tokens.extend(int(t) for t in tokens)
        if logits == "none":
            return np.zeros((0, self._n_vocab))
        ends = range(first + 1, len(self.tokens) + 1)
        if logits == "last":
            ends = range(len(self.tokens), len(self.tokens) + 1)
        return np.stack([self._row(end) for end in ends])

    def _row(self, end: int) -> np.ndarray:
        """Logits after the cache's first `end` tokens."""
        token, confidence = self._unseen, 1.0
        i = end - self._start
        if 0 <= i < len(self._choice) and self.tokens[:end] == self._text[:end]:
            token = self._choice[i]
            if self._confidence is not None:
                confidence = self._confidence[i]
        else:
            confidence = self._confidence_past_miss(end)
        rest = max(1.0 - confidence, 1e-12) / (self._n_vocab - 1)
        row = np.full(self._n_vocab, math.log(rest))
        row[token] = math.log(max(confidence, 1e-12))
        return row

    def _confidence_past_miss(self, end: int) -> float:
        """The recorded confidence after the cache's first `end` tokens where they leave the
        answer at one of the draft model's own misses (1.0 where nothing was recorded)."""
        if self._past_miss is None:
            return 1.0
        apart = self._start
        limit = min(end, len(self._text))
        while apart < limit and self.tokens[apart] == self._text[apart]:
            apart += 1
        i = apart - self._start
        if apart >= limit or i >= len(self._choice) or self.tokens[apart] != self._choice[i]:
            return 1.0
        chain = self._past_miss[i]
        after = end - apart - 1
        return 1.0 if chain is None or after >= len(chain) else chain[after]
