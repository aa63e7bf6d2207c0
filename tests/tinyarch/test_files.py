"""The tiny architecture files are small, F32 (plus d2t's I64 ids), accepted by SpecChat's
own header check, reproducible, and laid out as llama.cpp's loaders expect: the checks
here name the layout facts drafters rely on (which block holds the MTP head, which
tensors a drafter borrows from its target)."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

from specchat.models.gguf_reader import GGUFInfo, validate
from specchat.tinyarch import write_tiny_qwen35
from tests.tinyarch.conftest import TinyArchFiles

MAX_BYTES = 5 * 1024 * 1024
F32, I64 = 0, 27


def _names(info: GGUFInfo) -> set[str]:
    return {tensor.name for tensor in info.tensors}


def test_every_file_is_small_f32_and_passes_the_header_check(tiny_arch: TinyArchFiles) -> None:
    for field in fields(tiny_arch):
        path: Path = getattr(tiny_arch, field.name)
        assert path.stat().st_size <= MAX_BYTES, field.name
        info = validate(path)
        kinds = {tensor.name: tensor.ggml_type for tensor in info.tensors}
        assert set(kinds.values()) <= {F32, I64}, field.name
        assert {name for name, kind in kinds.items() if kind == I64} <= {"d2t"}


def test_a_seed_writes_the_same_bytes(tmp_path: Path) -> None:
    one = write_tiny_qwen35(tmp_path / "one.gguf", perturb=0.01)
    two = write_tiny_qwen35(tmp_path / "two.gguf", perturb=0.01)
    assert one.read_bytes() == two.read_bytes()


def test_the_qwen35_mtp_head_is_the_last_block(tiny_arch: TinyArchFiles) -> None:
    names = _names(validate(tiny_arch.qwen35_mtp))
    # common_speculative_types_from_gguf looks for blk.{block_count - 1}.nextn.eh_proj
    assert "blk.4.nextn.eh_proj.weight" in names
    assert not any(name.startswith("blk.4.") for name in _names(validate(tiny_arch.qwen35_plain)))
    # layers 0-2 recurrent, layer 3 full attention (full_attention_interval 4)
    assert {"blk.0.ssm_a", "blk.2.attn_qkv.weight", "blk.3.attn_q.weight"} <= names
    assert "blk.3.ssm_a" not in names


def test_the_drafters_borrow_from_their_targets(tiny_arch: TinyArchFiles) -> None:
    assistant = _names(validate(tiny_arch.gemma4_assistant))
    assert not any("attn_k" in name or "attn_v" in name for name in assistant)  # shared KV
    assert {"nextn.pre_projection.weight", "nextn.post_projection.weight"} <= assistant
    eagle3 = _names(validate(tiny_arch.eagle3))
    assert "token_embd.weight" not in eagle3 and {"fc.weight", "d2t"} <= eagle3
    dflash = _names(validate(tiny_arch.dflash))
    assert not {"token_embd.weight", "output.weight"} & dflash
    gemma4 = _names(validate(tiny_arch.gemma4))
    assert "output.weight" not in gemma4  # tied to token_embd
