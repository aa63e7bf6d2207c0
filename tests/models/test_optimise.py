"""models/optimise.py: the tiny target really converted to Q4_0 by llama.cpp, in a child process."""

from __future__ import annotations

import multiprocessing
import resource
import threading
from collections.abc import Iterator
from pathlib import Path

import llama_cpp
import numpy as np
import pytest

from specchat.engine.llamacpp.model import LlamaModel
from specchat.models.gguf_reader import read_metadata, validate
from specchat.models.optimise import (
    FTYPE_Q4_0,
    NotEnoughDisk,
    OptimiseCancelled,
    OptimiseError,
    derived_path,
    estimate_size,
    optimise,
    quality_path,
)
from specchat.models.transfer import DownloadProgress
from specchat.tinymodels import TinyModels, TinySpec, write_tiny_model


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.fixture
def no_children() -> Iterator[None]:
    yield
    assert multiprocessing.active_children() == []


def test_the_ftype_is_llama_cpps_q4_0() -> None:
    assert FTYPE_Q4_0 == llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0


def test_derived_names_say_what_they_come_from(tmp_path: Path) -> None:
    source = Path("/somewhere/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
    derived = derived_path(source, models_dir=tmp_path)
    assert derived == tmp_path / "qwen2.5-coder-1.5b-instruct-q4_k_m.derived-q4_0.gguf"
    assert (
        quality_path(derived).name == "qwen2.5-coder-1.5b-instruct-q4_k_m.derived-q4_0.quality.json"
    )


def test_tiny_target_becomes_a_q4_0_file_that_loads_and_generates(
    tiny_models: TinyModels, tmp_path: Path, no_children: None
) -> None:
    events: list[DownloadProgress] = []
    output = tmp_path / "out" / "tiny.derived-q4_0.gguf"
    done = optimise(tiny_models.target, output=output, progress=events.append)
    assert done.path == output and output.is_file()
    assert _leftovers(output.parent) == [output.name]  # no partial file left behind
    assert done.size == output.stat().st_size
    # The estimate the progress bar and disk check use is the real size here.
    assert done.estimated == done.size
    assert not done.requantised  # the tiny models are float32
    info = validate(output)
    assert info.metadata.get("general.file_type") == FTYPE_Q4_0
    assert {t.ggml_type for t in info.tensors if len(t.shape) == 2} >= {2}  # Q4_0 tensors

    convert = [e for e in events if e.stage == "convert"]
    assert convert[-1].finished and convert[-1].fraction == 1.0
    assert [e.done for e in convert] == sorted(e.done for e in convert)
    assert any(e.stage == "check" and e.finished for e in events)

    with LlamaModel(output, n_ctx=128) as model:
        assert "Q4_0" in model.info.description
        tokens = model.tokenize("the cat")
        out = []
        logits = model.decode(tokens, logits="last")[0]
        for _ in range(8):
            token = int(np.argmax(logits))
            out.append(token)
            logits = model.decode([token], logits="last")[0]
        assert len(out) == 8 and all(0 <= t < model.n_vocab for t in out)


def test_an_already_q4_0_file_is_refused(tiny_models: TinyModels, tmp_path: Path) -> None:
    first = optimise(tiny_models.target, output=tmp_path / "a.gguf")
    with pytest.raises(OptimiseError, match="already Q4_0"):
        optimise(first.path, output=tmp_path / "b.gguf")
    assert not (tmp_path / "b.gguf").exists()


def test_cancel_kills_the_child_and_keeps_nothing(
    tiny_models: TinyModels, tmp_path: Path, no_children: None
) -> None:
    cancel = threading.Event()
    output = tmp_path / "tiny.derived-q4_0.gguf"
    with pytest.raises(OptimiseCancelled):
        optimise(tiny_models.target, output=output, progress=lambda _e: cancel.set(), cancel=cancel)
    assert _leftovers(tmp_path) == []


def test_ctrl_c_kills_the_child_and_keeps_nothing(
    tiny_models: TinyModels, tmp_path: Path, no_children: None
) -> None:
    def interrupt(_event: DownloadProgress) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        optimise(tiny_models.target, output=tmp_path / "t.gguf", progress=interrupt)
    assert _leftovers(tmp_path) == []


def test_a_stale_partial_file_is_replaced(tiny_models: TinyModels, tmp_path: Path) -> None:
    output = tmp_path / "t.gguf"
    (tmp_path / "t.gguf.partial").write_bytes(b"left by a crash")
    optimise(tiny_models.target, output=output)
    assert _leftovers(tmp_path) == ["t.gguf"]


def test_not_enough_disk_is_refused_before_starting(
    tiny_models: TinyModels, tmp_path: Path
) -> None:
    expected = estimate_size(validate(tiny_models.target))
    with pytest.raises(NotEnoughDisk, match="not enough disk space") as caught:
        optimise(
            tiny_models.target,
            output=tmp_path / "t.gguf",
            free_space=lambda _folder: expected // 2,
        )
    assert str(tmp_path) in str(caught.value)
    assert _leftovers(tmp_path) == []


def test_a_write_the_system_refuses_is_a_clear_error(
    tiny_models: TinyModels, tmp_path: Path, no_children: None
) -> None:
    # A file-size limit makes the quantizer's writes fail as a full disk would; the spawned
    # child inherits it (Python ignores SIGXFSZ, so the write returns EFBIG).
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (40_000, hard))
    try:
        with pytest.raises(OptimiseError) as caught:
            optimise(tiny_models.target, output=tmp_path / "t.gguf")
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    assert "is the disk full?" in str(caught.value)
    assert _leftovers(tmp_path) == []


def test_corrupt_input_gives_a_clear_error(tiny_models: TinyModels, tmp_path: Path) -> None:
    data = tiny_models.target.read_bytes()
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(OptimiseError, match="not a usable GGUF file: truncated"):
        optimise(truncated, output=tmp_path / "out.gguf")
    text = tmp_path / "notes.gguf"
    text.write_text("not a model at all\n" * 100)
    with pytest.raises(OptimiseError, match="not a usable GGUF file"):
        optimise(text, output=tmp_path / "out.gguf")
    with pytest.raises(OptimiseError, match="not found"):
        optimise(tmp_path / "missing.gguf", output=tmp_path / "out.gguf")
    assert not (tmp_path / "out.gguf").exists()


def test_rows_that_q4_0_cannot_hold_are_refused(tmp_path: Path) -> None:
    odd = write_tiny_model(tmp_path / "odd.gguf", TinySpec(n_embd=48, n_head=4, n_ff=96))
    with pytest.raises(OptimiseError, match="not a multiple of 32"):
        optimise(odd, output=tmp_path / "out.gguf")
    assert not (tmp_path / "out.gguf").exists()


def test_metadata_of_the_copy_keeps_the_tokenizer(tiny_models: TinyModels, tmp_path: Path) -> None:
    output = optimise(tiny_models.target, output=tmp_path / "t.gguf").path
    keys = ("tokenizer.ggml.tokens", "tokenizer.chat_template", "general.name")
    source = read_metadata(tiny_models.target, keys=keys)
    copy = read_metadata(output, keys=keys)
    for key in keys:
        assert copy.get(key) == source.get(key)
