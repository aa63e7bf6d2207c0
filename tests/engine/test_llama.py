"""Tests for the llama.cpp wrapper: batched logits, KV rollback, errors that explain."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from specchat.engine.llamacpp.model import (
    ContextFullError,
    LlamaModel,
    LoadCancelled,
    ModelLoadError,
)
from specchat.engine.llamacpp.recurrent_state import Rollback
from specchat.tinymodels import TinyModels
from tests.helpers.tiny_recurrent import write_tiny_mamba


def test_batched_rows_match_one_at_a_time(tiny_target: LlamaModel) -> None:
    tokens = tiny_target.tokenize("the cat sat on the mat")
    tiny_target.reset()
    batched = tiny_target.decode(tokens, logits="all")
    tiny_target.reset()
    single = np.stack([tiny_target.decode([t], logits="last")[0] for t in tokens])
    assert batched.shape == (len(tokens), tiny_target.n_vocab)
    # Batched and single-row matmuls sum in different orders: float noise only.
    np.testing.assert_allclose(batched, single, atol=1e-2)


def test_rollback_gives_the_logits_of_a_fresh_context(tiny_models: TinyModels) -> None:
    accepted = [70, 71, 72]
    rejected = [90, 91, 92, 93]
    with (
        LlamaModel(tiny_models.target, n_ctx=256) as model,
        LlamaModel(tiny_models.target, n_ctx=256) as fresh,
    ):
        model.decode([*accepted, *rejected], logits="all")
        model.truncate(len(accepted))
        assert model.tokens == accepted
        after_rollback = model.decode([80], logits="last")[0]
        reference = fresh.decode([*accepted, 80], logits="last")[0]
    np.testing.assert_allclose(after_rollback, reference, atol=1e-4)


@pytest.fixture(scope="module")
def tiny_mamba(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_mamba(tmp_path_factory.mktemp("mamba") / "tiny-mamba.gguf")


def test_recurrent_rollback_keeps_the_context(tiny_mamba: Path, tiny_models: TinyModels) -> None:
    accepted = [70, 71, 72]
    rejected = [90, 91, 92, 93]
    with (
        LlamaModel(tiny_mamba, n_ctx=256, n_threads=1) as model,
        LlamaModel(tiny_mamba, n_ctx=256, n_threads=1) as fresh,
        LlamaModel(tiny_models.target, n_ctx=256, n_threads=1) as transformer,
    ):
        # Mamba has no llama.cpp state snapshots: a checkpoint taken before the pass brings
        # its state back, and the kept tokens are evaluated again.
        assert model.rollback is Rollback.CHECKPOINT and model.snapshot_depth == 0
        assert model.can_rollback and model.checkpoint_bytes > 0
        assert transformer.rollback is Rollback.CACHE and transformer.can_rollback
        model.decode(accepted[:1], logits="none")
        model.mark(1 + len(accepted) + len(rejected))
        model.decode([*accepted[1:], *rejected], logits="all")
        model.truncate(len(accepted))
        assert model.tokens == accepted
        after_rollback = model.decode([80], logits="last")[0]
        reference = fresh.decode([*accepted, 80], logits="last")[0]
        fresh.reset()
        alone = fresh.decode([80], logits="last")[0]
    np.testing.assert_allclose(after_rollback, reference, atol=1e-4)
    assert not np.allclose(alone, reference, atol=1e-2)  # so the context did matter


def test_recurrent_rollback_without_a_checkpoint_evaluates_the_kept_text_again(
    tiny_mamba: Path,
) -> None:
    with (
        LlamaModel(tiny_mamba, n_ctx=256, n_threads=1) as model,
        LlamaModel(tiny_mamba, n_ctx=256, n_threads=1) as fresh,
    ):
        model.decode([70, 71, 72, 90, 91], logits="all")
        model.truncate(2)  # no mark: the only way back is from the start
        assert model.tokens == [70, 71]
        after = model.decode([80], logits="last")[0]
        reference = fresh.decode([70, 71, 80], logits="last")[0]
    np.testing.assert_allclose(after, reference, atol=1e-4)


def test_sync_keeps_the_common_prefix(tiny_target: LlamaModel) -> None:
    tiny_target.reset()
    tiny_target.decode([10, 11, 12, 13], logits="none")
    assert tiny_target.sync([10, 11, 99]) == 2
    assert tiny_target.tokens == [10, 11]


def test_context_overflow_is_an_error_not_an_abort(tiny_models: TinyModels) -> None:
    with LlamaModel(tiny_models.target, n_ctx=32) as model:
        # llama.cpp may round the context up; fill whatever it really holds, less two.
        filler = [40 + i % 200 for i in range(model.n_ctx - 2)]
        model.decode(filler, logits="none")
        with pytest.raises(ContextFullError):
            model.decode([1, 2, 3], logits="last")
        assert model.n_past == len(filler)  # nothing half-evaluated
        model.decode([1, 2], logits="last")  # what fits still works
        assert model.room() == 0


def test_missing_and_corrupt_files_are_explained(tmp_path: Path, tiny_models: TinyModels) -> None:
    with pytest.raises(ModelLoadError, match="not found"):
        LlamaModel(tmp_path / "nope.gguf")
    truncated = tmp_path / "cut.gguf"
    truncated.write_bytes(tiny_models.target.read_bytes()[:5000])
    with pytest.raises(ModelLoadError, match="not a usable GGUF file"):
        LlamaModel(truncated)
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model at all" * 100)
    with pytest.raises(ModelLoadError, match=r"junk\.gguf"):
        LlamaModel(junk)


def test_load_reports_progress_and_can_be_cancelled(tiny_models: TinyModels) -> None:
    seen: list[float] = []
    with LlamaModel(tiny_models.target, n_ctx=64, progress=seen.append) as model:
        assert model.info.backend == "CPU" or model.info.gpu_layers > 0
        assert model.info.n_layers == 2
    assert seen and seen[-1] == pytest.approx(1.0)
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(LoadCancelled):
        LlamaModel(tiny_models.target, n_ctx=64, cancel=cancel)


def test_pieces_and_special_tokens(tiny_target: LlamaModel) -> None:
    tokens = tiny_target.tokenize("<|im_end|>hi", parse_special=True)
    assert tokens[0] == tiny_target.eos
    assert tiny_target.is_eog(tokens[0])
    assert tiny_target.piece(tokens[0]) == b""  # control tokens never reach the text
    assert b"".join(tiny_target.piece(t) for t in tokens[1:]) == b"hi"


def test_spelled_tokens_render_as_their_text(tiny_models: TinyModels) -> None:
    """A format read by its markers has them spelled (gpt-oss's control tokens)."""
    model = LlamaModel(tiny_models.target, n_ctx=64)
    try:
        start = model.single_token("<|im_start|>")
        assert start is not None and model.piece(start) == b""
        space_t = model.single_token(" t")  # "Ġt": the vocabulary spells it otherwise
        assert space_t is not None and model.piece(space_t) == b" t"
        model.spell_tokens(["<|im_start|>", "two tokens", " t"])
        assert model.piece(start) == b"<|im_start|>"
        assert model.piece(space_t) == b" t"
    finally:
        model.close()
