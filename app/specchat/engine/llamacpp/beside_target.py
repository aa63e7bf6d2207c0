"""What a draft that runs beside its target needs from llama.cpp: a context of its own over
the target's (ctx_other), the target's layer inputs as its features, and llama.cpp's way of
reading a draft token (top-10, then the best)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import llama_cpp
import numpy as np

from specchat.engine.llamacpp import staging_api
from specchat.engine.llamacpp.backend import last_error_line
from specchat.engine.llamacpp.load import ModelLoadError

if TYPE_CHECKING:
    from specchat.engine.llamacpp.ext_batch import ExtBatch
    from specchat.engine.llamacpp.model import LlamaModel

#: common/speculative.cpp samples its draft tokens through a top-k of 10.
DRAFT_TOP_K = 10


def draft_context(weights: Any, target: LlamaModel, name: str) -> Any:
    """A context over the draft's `weights` beside `target`'s context (it embeds, or predicts,
    with the target's tensors), sized as common_speculative sizes a draft's: the target's
    context, one sequence, no recurrent snapshots."""
    params = llama_cpp.llama_context_default_params()
    params.n_ctx = target.n_ctx
    params.n_batch = target.n_batch
    params.n_ubatch = target.n_batch
    params.n_seq_max = 1
    params.n_threads = target.info.n_threads
    params.n_threads_batch = target.info.n_threads
    params.no_perf = True
    params.ctx_other = target.context
    params.n_rs_seq = 0
    ctx = llama_cpp.llama_init_from_model(weights, params)
    if not ctx:
        reason = last_error_line() or "llama.cpp could not make its context"
        raise ModelLoadError(f"could not start the {name}: {reason}")
    return ctx


def check_exports(name: str) -> None:
    """Refuse (ModelLoadError) where libllama lacks the functions such a draft needs."""
    if not staging_api.available(staging_api.NEXTN + staging_api.LAYER_INPUTS):
        raise ModelLoadError(
            f"this llama.cpp build does not export the layer-input functions the {name} needs"
        )


def read_target_layers(weights: Any, name: str) -> list[int]:
    layers = staging_api.target_layer_ids(weights)
    if not layers:
        raise ModelLoadError(f"the {name} names no target layers to read")
    return layers


def check_feature_width(name: str, width: int, target: LlamaModel) -> None:
    """Refuse a draft whose encoder reads target rows `width` wide from a target whose rows
    are another width (llama.cpp would abort on the mismatch, not report it)."""
    n_embd = int(llama_cpp.llama_model_n_embd(target.model_handle))
    if width != n_embd:
        raise ModelLoadError(
            f"the {name} reads hidden states {width} wide, the target writes {n_embd}: "
            "it belongs to another model"
        )


def target_features(
    target: LlamaModel, layers: Sequence[int], rows: int, *, n_layer: int
) -> np.ndarray:
    """The last target pass's features, one row per token: the inputs of `layers` side by
    side (rows × len(layers)·n_embd). A layer id equal to the target's layer count means its
    final-norm output, which the target exposes as its nextn embeddings (EAGLE-3 allows it)."""
    n_embd = int(llama_cpp.llama_model_n_embd(target.model_handle))
    parts = [
        staging_api.layer_inp_rows(target.context, layer, rows, n_embd)
        if layer < n_layer
        else staging_api.nextn_rows(target.context, rows, n_embd)
        for layer in layers
    ]
    return np.ascontiguousarray(np.concatenate(parts, axis=1), dtype=np.float32)


def keep_target_features(target: LlamaModel, layers: Sequence[int], *, n_layer: int) -> None:
    """Make every target pass keep the rows `target_features` reads."""
    for layer in layers:
        if layer < n_layer:
            staging_api.set_embeddings_layer_inp(target.context, layer, True)
        elif layer == n_layer:
            staging_api.set_embeddings_nextn(target.context, True, masked=False)
        else:
            raise ModelLoadError(f"the draft reads target layer {layer}; the target has {n_layer}")


def top_candidate(logits: np.ndarray) -> tuple[int, float]:
    """The draft token llama.cpp takes from a row of logits and its probability there: the
    best of the top 10, whose probability is its softmax share among those 10 (what its
    `--spec-draft-p-min` compares)."""
    best = int(np.argmax(logits))
    k = min(DRAFT_TOP_K, logits.shape[-1])
    top = np.partition(logits, -k)[-k:]
    return best, float(1.0 / np.exp(top - logits[best]).sum())


def logits_row(ctx: Any, index: int, n_vocab: int) -> np.ndarray:
    """Row `index` of the last pass's logits, copied out."""
    pointer = llama_cpp.llama_get_logits_ith(ctx, index)
    if not pointer:
        raise RuntimeError(f"no logits for row {index}")
    row: np.ndarray = np.ctypeslib.as_array(pointer, shape=(n_vocab,)).copy()
    return row


def free_draft(batch: ExtBatch | None, ctx: Any, weights: Any) -> None:
    """Free a draft's batch, then its context, then the weights it ran over (None where it
    runs over the target's own, as an MTP head does)."""
    if batch is not None:
        batch.close()
    if ctx is not None:
        llama_cpp.llama_free(ctx)
    if weights is not None:
        llama_cpp.llama_model_free(weights)
