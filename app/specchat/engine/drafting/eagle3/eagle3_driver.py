"""An EAGLE-3 draft beside its target, driven as llama.cpp drives one
(common/speculative.cpp, `common_speculative_impl_draft_eagle3`).

The draft is one decoder layer that reads, at position P, the pair (t[P+1], g[P]): the
token after P and g[P], its encoder's fusion of three of the target's layer inputs at P.

- Every target decode call: its rows' features go through the encoder (an ENCODE pass) to
  g, and the pairs the call completes are written into the draft's cache. The last row's
  pair needs the token after the call, which only the next call or the draft knows: it is
  the *deferred boundary* (pending_pos, pending_g). The next call's first token completes
  it (the bridge), unless a draft wrote it already.
- A draft seeds the boundary with the context's last token (the seed pass), then chains:
  each step's token, paired with the step's own pre-norm hidden state, at the next
  position. Tokens are the argmax, read through llama.cpp's top-10 sampler.
- The chain's positions are dropped from the draft's cache again (the verify pass brings
  the target's own features for them); the seed stays, as llama.cpp keeps it.
- On a rollback the boundary becomes the last kept position, with the g the target's pass
  gave it (llama.cpp's `accept`); its pair in the draft's cache held a token that is gone,
  so it is dropped and written again by the next draft or the next call's bridge.

The one difference from llama.cpp: its loop always drafts before a target pass, so the
stale pair at the boundary is always rewritten by the seed; SpecChat may pass without
drafting (plain rounds, other drafters), so the rollback drops that pair itself and the
bridge writes it. Where llama.cpp's loop runs, the draft's cache ends up the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import llama_cpp
import numpy as np

from specchat.engine.llamacpp import staging_api
from specchat.engine.llamacpp.beside_target import (
    check_exports,
    check_feature_width,
    draft_context,
    keep_target_features,
    logits_row,
    read_target_layers,
    target_features,
    top_candidate,
)
from specchat.engine.llamacpp.ext_batch import ExtBatch, positions_per_entry
from specchat.engine.llamacpp.hidden_state_head import KEEP_ROWS, HiddenStateHead
from specchat.engine.llamacpp.load import ModelLoadError, read_metadata

if TYPE_CHECKING:
    from specchat.engine.llamacpp.model import LlamaModel

#: The architecture of an EAGLE-3 draft file (general.architecture).
EAGLE3_ARCHITECTURE = "eagle3"


class Eagle3Draft(HiddenStateHead):
    """An EAGLE-3 draft and its context, following its target's cache.

    Attributes:
        target: the model it drafts for.
        name: how errors name it.
        n_embd: width of g and of the draft's hidden state.
    """

    def __init__(
        self,
        target: LlamaModel,
        weights: Any,
        *,
        name: str = "EAGLE-3 draft",
        path: Path | None = None,
        serves: str = "eagle3",
    ) -> None:
        """A draft over `weights` (loaded by the caller from `path`, freed with the draft)."""
        super().__init__(target, weights, name=name, path=path, serves=serves)

    def _start(self, target: LlamaModel, weights: Any) -> None:
        check_exports(self.name)
        layers = read_target_layers(weights, self.name)
        if len(layers) != 3:
            raise ModelLoadError(f"the {self.name} reads {len(layers)} target layers, not 3")
        width = read_metadata(weights, f"{EAGLE3_ARCHITECTURE}.target_hidden_size")
        check_feature_width(self.name, int(width or 0), target)
        self._n_layer_target = int(llama_cpp.llama_model_n_layer(target.model_handle))
        self._ctx = draft_context(weights, target, self.name)
        self._memory = llama_cpp.llama_get_memory(self._ctx)
        self._batch = ExtBatch(self._ctx, n_pos=positions_per_entry(weights), name=self.name)
        self.n_embd = int(llama_cpp.llama_model_n_embd(weights))
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(weights)))
        self._n_ubatch = int(llama_cpp.llama_n_ubatch(self._ctx))
        self._layers = layers  # before the target is asked for them: close() undoes it
        keep_target_features(target, layers, n_layer=self._n_layer_target)
        # g of the encoder, and of each draft step the pre-norm state the next step reads.
        staging_api.set_embeddings_nextn(self._ctx, True, masked=True)
        self._g: dict[int, np.ndarray] = {}  # g by target position, the recent ones
        self._pending_pos = -1
        self._pending_g = np.zeros(self.n_embd, dtype=np.float32)

    # --- following the target's cache (llama.cpp's process and accept) ------------------------
    def decoded(self, tokens: Sequence[int], start: int) -> None:
        n = len(tokens)
        features = target_features(self.target, self._layers, n, n_layer=self._n_layer_target)
        g = self._encode(features)
        batch = self._batch
        assert batch is not None
        pending = self._pending_pos
        if pending >= 0 and pending + 1 == start and pending > self._cached_max():
            # The bridge: this call's first token completes the last call's boundary.
            batch.add_token(tokens[0], pending, embd=self._pending_g)
        for k in range(n - 1):
            batch.add_token(tokens[k + 1], start + k, embd=g[k])
        for offset in range(n):
            self._g[start + offset] = g[offset]
        self._pending_pos = start + n - 1
        self._pending_g = g[-1]
        for old in [p for p in self._g if p < start + n - KEEP_ROWS]:
            del self._g[old]
        if batch.size:
            batch.process()

    def dropped(self, n_keep: int) -> None:
        self._forget_from(max(n_keep - 1, 0))
        for position in [p for p in self._g if p >= n_keep]:
            del self._g[position]
        if n_keep == 0:
            self._pending_pos = -1
            self._pending_g = np.zeros(self.n_embd, dtype=np.float32)
            return
        self._pending_pos = n_keep - 1
        # A boundary older than the rows kept here gets no g: that one pair is the draft's
        # poorer, never the answer.
        self._pending_g = self._g.get(n_keep - 1, np.zeros(self.n_embd, dtype=np.float32))

    def _encode(self, features: np.ndarray) -> np.ndarray:
        """g for each row of features: ENCODE passes of at most a micro-batch, at placeholder
        positions after the draft's cache (the encoder reads none)."""
        batch = self._batch
        assert batch is not None
        parts = []
        for begin in range(0, len(features), self._n_ubatch):
            chunk = features[begin : begin + self._n_ubatch]
            pos = self._cached_max() + 1
            for offset, row in enumerate(chunk):
                batch.add_embd(row, (pos + offset,), output=True)
            batch.process(llama_cpp.LLAMA_PROCESS_TYPE_ENCODE)
            parts.append(staging_api.nextn_rows(self._ctx, len(chunk), self.n_embd))
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _cached_max(self) -> int:
        return int(llama_cpp.llama_memory_seq_pos_max(self._memory, 0))

    def _forget_from(self, position: int) -> None:
        llama_cpp.llama_memory_seq_rm(self._memory, 0, position, -1)

    # --- drafting (llama.cpp's draft) ------------------------------------------------------------
    @property
    def ready(self) -> bool:
        """Whether it can draft now: its boundary is the target's last cached position."""
        return self._pending_pos >= 0 and self._pending_pos == self.target.n_past - 1

    def draft(self, last: int, k: int, *, min_confidence: float = 0.0) -> list[int]:
        """Up to k greedy draft tokens after the context whose last token, `last`, the
        target has not cached yet. Stops at a token whose share of the top 10 is below
        `min_confidence` (llama.cpp's p-min: checked at every step)."""
        if not self.ready or k <= 0:
            return []
        batch = self._batch
        assert batch is not None
        pos = self._pending_pos
        tokens: list[int] = []
        self._forget_from(pos)
        try:
            batch.add_token(last, pos, embd=self._pending_g, output=True)
            batch.process()
            while True:
                token, p = top_candidate(logits_row(self._ctx, 0, self.n_vocab))
                if p < min_confidence:
                    break
                tokens.append(token)
                if len(tokens) >= k:
                    break
                hidden = staging_api.nextn_row(self._ctx, 0, self.n_embd)
                batch.add_token(token, pos + len(tokens), embd=hidden, output=True)
                batch.process()
        finally:
            # The seed's pair is the boundary's own and stays; the chain's go.
            self._forget_from(pos + 1)
        return tokens
