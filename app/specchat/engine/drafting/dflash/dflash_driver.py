"""A DFlash draft beside its target, driven as llama.cpp drives one
(common/speculative.cpp, `common_speculative_impl_draft_dflash`).

A DFlash draft denoises a whole block at once: [last token, mask, mask, ...] at the
positions after the target's cache, attending (non-causally, unless the file says
otherwise) to K/V made from the target's hidden states. It embeds and predicts with the
target's own tensors.

- Every target decode call: the inputs of the draft's target layers, side by side, go into
  the draft's cache as rows of embeddings at the call's positions (a DECODE with no
  output: the draft's fc and norm turn them into every layer's K/V).
- A draft decodes the block [last, mask × n_max] at positions n_past, n_past + 1, ... and
  reads the argmax (through llama.cpp's top-10 sampler) at the mask positions; the block
  is then dropped from the draft's cache again (the verify pass brings the target's own
  features for those positions).
- On a rollback the draft's cache drops what the target's drops (llama.cpp's `accept` does
  nothing; its loop drops the draft's cache beside the target's).

`n_max` is llama.cpp's `--spec-draft-n-max` for this draft: the block holds n_max masks
whatever a round asks for, and a round takes the first k of its tokens (llama.cpp truncates
the same way where its room is short). llama.cpp's default is 3; here it is the trained
block's (block_size − 1), the most a round can use.

DFlash2 drafts (a selector over the hidden state) and DSpark drafts (a Markov head, an
anchor-first block) are other drivers in llama.cpp and are refused here.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import llama_cpp

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
from specchat.engine.llamacpp.hidden_state_head import HiddenStateHead
from specchat.engine.llamacpp.load import ModelLoadError, read_metadata

if TYPE_CHECKING:
    from specchat.engine.llamacpp.model import LlamaModel

#: The block size llama.cpp assumes where a file names none.
DEFAULT_BLOCK_SIZE = 16


class DFlashDraft(HiddenStateHead):
    """A DFlash draft and its context, following its target's cache.

    Attributes:
        target: the model it drafts for.
        name: how errors name it.
        block_size: the block the draft was trained on (dflash.block_size).
        n_max: masks in each block it denoises (1 ≤ n_max ≤ block_size − 1).
        mask_token: the token the block is padded with.
    """

    n_max: int

    def __init__(
        self,
        target: LlamaModel,
        weights: Any,
        *,
        name: str = "DFlash draft",
        path: Path | None = None,
        serves: str = "dflash",
    ) -> None:
        """A draft over `weights` (loaded by the caller from `path`, freed with the draft)."""
        super().__init__(target, weights, name=name, path=path, serves=serves)

    def _start(self, target: LlamaModel, weights: Any) -> None:
        check_exports(self.name)
        if staging_api.dflash_selector_top_k(weights) > 0:
            raise ModelLoadError(f"the {self.name} is a DFlash2 draft, which SpecChat cannot run")
        layers = read_target_layers(weights, self.name)
        n_layer = int(llama_cpp.llama_model_n_layer(target.model_handle))
        if max(layers) >= n_layer:
            raise ModelLoadError(
                f"the {self.name} reads target layer {max(layers)}; the target has {n_layer}"
            )
        # The draft is as wide as its target: its fc reads len(layers) rows of its own width.
        check_feature_width(self.name, int(llama_cpp.llama_model_n_embd(weights)), target)
        self.block_size = int(read_metadata(weights, "dflash.block_size") or DEFAULT_BLOCK_SIZE)
        if self.block_size < 2:
            raise ModelLoadError(f"the {self.name}'s block holds {self.block_size} tokens")
        self.n_max = self.block_size - 1
        self.mask_token = int(llama_cpp.llama_vocab_mask(llama_cpp.llama_model_get_vocab(weights)))
        causal = read_metadata(weights, "dflash.attention.causal") == "true"
        self._ctx = draft_context(weights, target, self.name)
        self._memory = llama_cpp.llama_get_memory(self._ctx)
        self._batch = ExtBatch(self._ctx, n_pos=positions_per_entry(weights), name=self.name)
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(weights)))
        self._n_ubatch = int(llama_cpp.llama_n_ubatch(self._ctx))
        self._n_layer_target = n_layer
        self._layers = layers  # before the target is asked for them: close() undoes it
        keep_target_features(target, layers, n_layer=n_layer)
        staging_api.set_embeddings_nextn(self._ctx, True, masked=True)
        # The block's positions see each other both ways (unless the draft was trained causal).
        llama_cpp.llama_set_causal_attn(self._ctx, causal)
        self._fed = 0  # positions of the draft's cache that mirror the target's

    # --- following the target's cache (llama.cpp's process) ------------------------------------
    def decoded(self, tokens: Sequence[int], start: int) -> None:
        batch = self._batch
        assert batch is not None
        features = target_features(
            self.target, self._layers, len(tokens), n_layer=self._n_layer_target
        )
        for begin in range(0, len(tokens), self._n_ubatch):
            for offset, row in enumerate(features[begin : begin + self._n_ubatch]):
                p = start + begin + offset
                batch.add_embd(row, (p, p, p, 0), output=False)
            batch.process()
        self._fed = start + len(tokens)

    def dropped(self, n_keep: int) -> None:
        llama_cpp.llama_memory_seq_rm(self._memory, 0, n_keep, -1)
        self._fed = min(self._fed, n_keep)

    # --- drafting (llama.cpp's draft) ------------------------------------------------------------
    @property
    def ready(self) -> bool:
        """Whether it can draft now: its cache mirrors the target's."""
        return self._fed == self.target.n_past

    def draft(self, last: int, k: int, *, min_confidence: float = 0.0) -> list[int]:
        """Up to k greedy draft tokens after the context whose last token, `last`, the
        target has not cached yet (the first k of the block's n_max). Stops at a token
        whose share of the top 10 is below `min_confidence` (llama.cpp's p-min)."""
        if not self.ready or k <= 0:
            return []
        batch = self._batch
        assert batch is not None
        pos0 = self.target.n_past
        tokens: list[int] = []
        try:
            for i in range(self.n_max + 1):
                batch.add_token(last if i == 0 else self.mask_token, pos0 + i, output=True)
            batch.process()
            for i in range(1, self.n_max + 1):
                token, p = top_candidate(logits_row(self._ctx, i, self.n_vocab))
                if p < min_confidence:
                    break
                tokens.append(token)
        finally:
            llama_cpp.llama_memory_seq_rm(self._memory, 0, pos0, -1)
        return tokens[:k]
