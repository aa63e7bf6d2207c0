"""A draft head that reads its target's hidden state: an MTP head, or a Gemma 4 assistant.

Both run in a context of their own beside the target's (`ctx_type` MTP, `ctx_other` the
target's context) and are driven as llama.cpp's common/speculative.cpp drives them
(`common_speculative_impl_draft_mtp`):

- Every target decode makes the target output its nextn embedding h for every row. The head
  holds, at position p, the token there paired with h of position p − 1. An MTP head (a
  Qwen3.5 `nextn` layer) keeps its own cache of those pairs and is fed each target decode's
  rows; a Gemma 4 assistant reads the target's cache itself and needs no feeding.
- A draft starts from the context's last token at the next position, paired with h of the
  target's last cached row, and chains: each step's token is paired with the head's own h
  for that step. An MTP head places step i at position pos0 + i; an assistant places every
  step at pos0.
- The draft region is dropped from the head's cache again before the target's verify pass
  is fed to it, and on a rollback the head's cache drops what the target's drops, its next
  h being the target's row for the last kept token.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import llama_cpp
import numpy as np

from specchat.engine.llamacpp import staging_api
from specchat.engine.llamacpp.backend import last_error_line
from specchat.engine.llamacpp.beside_target import logits_row
from specchat.engine.llamacpp.ext_batch import ExtBatch, positions_per_entry
from specchat.engine.llamacpp.hidden_state_head import KEEP_ROWS, HiddenStateHead
from specchat.engine.llamacpp.load import ModelLoadError

if TYPE_CHECKING:
    from specchat.engine.llamacpp.model import LlamaModel


class DraftHead(HiddenStateHead):
    """A target's draft head and its context, following the target's cache.

    Attributes:
        shared: whether it reads the target's cache (a Gemma 4 assistant) instead of
            keeping its own (an MTP head).
        n_embd: width of the hidden-state rows it reads.
    """

    def __init__(
        self,
        target: LlamaModel,
        weights: Any = None,
        *,
        name: str = "MTP head",
        path: Path | None = None,
        serves: str = "mtp",
    ) -> None:
        """A head over `weights` (an assistant's own, loaded by the caller from `path` and
        freed with the head) or, without them, over the target's own MTP layers (the target
        must be loaded with `load_mtp`)."""
        super().__init__(target, weights, name=name, path=path, serves=serves)

    def _start(self, target: LlamaModel, weights: Any) -> None:
        name = self.name
        if not staging_api.available():
            raise ModelLoadError(
                f"this llama.cpp build does not export the hidden-state functions the {name} needs"
            )
        model = weights if weights is not None else target.model_handle
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = target.n_ctx
        params.n_batch = target.n_batch
        params.n_ubatch = target.n_batch
        params.n_seq_max = 1
        params.n_threads = target.info.n_threads
        params.n_threads_batch = target.info.n_threads
        params.no_perf = True
        params.ctx_type = llama_cpp.LLAMA_CONTEXT_TYPE_MTP
        params.ctx_other = target.context
        params.n_rs_seq = 0
        ctx = llama_cpp.llama_init_from_model(model, params)
        if not ctx:
            reason = last_error_line() or "llama.cpp could not make its context"
            raise ModelLoadError(f"could not start the {name}: {reason}")
        self._ctx = ctx
        self._memory = llama_cpp.llama_get_memory(ctx)
        self._batch = ExtBatch(ctx, n_pos=positions_per_entry(model), name=name)
        self.n_embd = int(llama_cpp.llama_model_n_embd_out(model))
        target_embd = int(llama_cpp.llama_model_n_embd_out(target.model_handle))
        if self.n_embd != target_embd:
            raise ModelLoadError(
                f"the {name} reads hidden states {self.n_embd} wide, the target writes "
                f"{target_embd}: it belongs to another model"
            )
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(model)))
        staging_api.set_embeddings_nextn(target.context, True, masked=False)
        staging_api.set_embeddings_nextn(ctx, True, masked=True)
        self.shared = staging_api.ctx_other(ctx) == _address(target.context)
        self._rows: dict[int, np.ndarray] = {}
        self._pending: np.ndarray | None = None
        self._fed = 0  # positions of the head's own cache that mirror the target's

    # --- following the target's cache ----------------------------------------------------------
    def decoded(self, tokens: Sequence[int], start: int) -> None:
        rows = staging_api.nextn_rows(self.target.context, len(tokens), self.n_embd)
        if not self.shared:
            if self._pending is None or start == 0:
                # No row for the position before (the start of the cache, or a row long
                # forgotten): that one pair is the head's poorer, never the answer.
                self._pending = np.zeros(self.n_embd, dtype=np.float32)
            self._feed(tokens, start, rows)
        for offset, row in enumerate(rows):
            self._rows[start + offset] = row
        self._pending = rows[-1]
        self._forget_rows_before(start + len(tokens) - KEEP_ROWS)

    def dropped(self, n_keep: int) -> None:
        if not self.shared and self._fed > n_keep:
            llama_cpp.llama_memory_seq_rm(self._memory, 0, n_keep, -1)
            self._fed = n_keep
        self._pending = self._rows.get(n_keep - 1) if n_keep > 0 else None
        for position in [p for p in self._rows if p >= n_keep]:
            del self._rows[position]

    def _feed(self, tokens: Sequence[int], start: int, rows: np.ndarray) -> None:
        """Pair each token with the target's row one position back (the first with the row
        before this call) and run the head's cache over them."""
        assert self._pending is not None and self._batch is not None
        paired = np.vstack([self._pending[None, :], rows[:-1]]).astype(np.float32)
        for offset, token in enumerate(tokens):
            self._batch.add_token(token, start + offset, embd=paired[offset])
        self._batch.process()
        self._fed = start + len(tokens)

    def _forget_rows_before(self, position: int) -> None:
        for old in [p for p in self._rows if p < position]:
            del self._rows[old]

    # --- drafting ----------------------------------------------------------------------------
    @property
    def ready(self) -> bool:
        """Whether it can draft now: it has the target's last row, and (an MTP head) its
        cache mirrors the target's."""
        if self._pending is None:
            return False
        return self.shared or self._fed == self.target.n_past

    def draft(self, last: int, k: int, *, min_confidence: float = 0.0) -> list[int]:
        """Up to k greedy draft tokens after the context whose last token, `last`, the
        target has not cached yet (at position pos0 = target.n_past). Stops early at a
        token whose probability under the head is below `min_confidence`."""
        if not self.ready or k <= 0:
            return []
        pos0 = self.target.n_past
        batch = self._batch
        assert self._pending is not None and batch is not None
        tokens: list[int] = []
        batch.add_token(last, pos0, embd=self._pending, output=True)
        try:
            for step in range(k):
                batch.process()
                logits = logits_row(self._ctx, 0, self.n_vocab)
                token = int(np.argmax(logits))
                if min_confidence > 0 and step > 0 and _top_probability(logits) < min_confidence:
                    break
                tokens.append(token)
                if step + 1 == k:
                    break
                h = staging_api.nextn_row(self._ctx, 0, self.n_embd)
                position = pos0 if self.shared else pos0 + step + 1
                batch.add_token(token, position, embd=h, output=True)
        finally:
            if not self.shared:
                # The verify pass brings the target's own rows for these positions.
                llama_cpp.llama_memory_seq_rm(self._memory, 0, pos0, -1)
        return tokens


def _address(ctx: Any) -> int:
    return int(ctypes.cast(ctx, ctypes.c_void_p).value or 0)


def _top_probability(logits: np.ndarray) -> float:
    shifted = np.exp(logits - logits.max())
    return float(shifted.max() / shifted.sum())


def layer_count_nextn(model: Any) -> int:
    """MTP layers a loaded model has (0 when it has none, or they were not loaded)."""
    return int(llama_cpp.llama_model_n_layer_nextn(model))
