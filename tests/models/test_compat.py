"""Target/draft compatibility from metadata: tiny pairs, doctored vocabularies, the real pair."""

from __future__ import annotations

from pathlib import Path

import pytest

from specchat.models.compat import CompatVerdict, check_compatible
from specchat.tinymodels import TinyModels, TinySpec, vocabulary, write_tiny_model


def test_tiny_pair_is_compatible(tiny_models: TinyModels) -> None:
    for draft in (tiny_models.draft_same, tiny_models.draft_close, tiny_models.draft_far):
        verdict = check_compatible(tiny_models.target, draft)
        assert verdict == CompatVerdict(True, verdict.reason)
        assert verdict
        assert "vocabulary" in verdict.reason


def test_odd_vocabulary_is_incompatible_with_the_first_difference(tiny_models: TinyModels) -> None:
    verdict = check_compatible(tiny_models.target, tiny_models.odd_vocab)
    assert not verdict.ok
    tokens, _, _ = vocabulary(0)
    odd, _, _ = vocabulary(1)
    first = next(i for i in range(5, len(tokens)) if tokens[i] != odd[i])
    assert verdict.reason == (
        f"draft vocabulary differs at token {first}: {tokens[first]!r} vs {odd[first]!r}"
    )


def test_unreadable_draft_gives_a_verdict_not_an_exception(
    tiny_models: TinyModels, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(Path(tiny_models.target).read_bytes()[:2000])
    verdict = check_compatible(tiny_models.target, broken)
    assert not verdict.ok
    assert verdict.reason.startswith("cannot read the draft (broken.gguf): truncated")


def test_model_without_tokenizer(tiny_models: TinyModels, tmp_path: Path) -> None:
    import gguf

    bare = tmp_path / "bare.gguf"
    writer = gguf.GGUFWriter(str(bare), "llama")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    verdict = check_compatible(tiny_models.target, bare)
    assert verdict == CompatVerdict(False, "the draft has no tokenizer in its metadata")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"tokenizer.ggml.add_bos_token": True}, "add-BOS flags differ"),
        ({"tokenizer.ggml.eos_token_id": 1}, "EOS tokens differ"),
        ({"tokenizer.ggml.bos_token_id": 1}, "BOS tokens differ"),
        ({"tokenizer.ggml.pre": "llama-bpe"}, "pre-tokenizers differ"),
    ],
)
def test_special_token_and_tokenizer_differences(
    tiny_models: TinyModels, tmp_path: Path, change: dict[str, object], expected: str
) -> None:
    draft = _doctored_copy(Path(tiny_models.target), tmp_path / "draft.gguf", change)
    verdict = check_compatible(tiny_models.target, draft)
    assert not verdict.ok
    assert verdict.reason.startswith(expected), verdict.reason


def test_vocabulary_size_difference_over_128(tiny_models: TinyModels, tmp_path: Path) -> None:
    tokens, _, _ = vocabulary(0)
    extra = [f"<extra_{i}>" for i in range(129)]
    draft = _doctored_copy(
        Path(tiny_models.target),
        tmp_path / "big.gguf",
        {
            "tokenizer.ggml.tokens": tokens + extra,
            "tokenizer.ggml.token_type": [1] * (len(tokens) + len(extra)),
        },
    )
    verdict = check_compatible(tiny_models.target, draft)
    assert not verdict.ok
    assert "differ by 129 tokens" in verdict.reason
    # 128 extra (padding) tokens are within llama.cpp's allowance.
    padded = _doctored_copy(
        Path(tiny_models.target),
        tmp_path / "padded.gguf",
        {
            "tokenizer.ggml.tokens": tokens + extra[:128],
            "tokenizer.ggml.token_type": [1] * (len(tokens) + 128),
        },
    )
    assert check_compatible(tiny_models.target, padded).ok


def _doctored_copy(source: Path, dest: Path, change: dict[str, object]) -> Path:
    """Rewrite `source`'s metadata with `change` applied (tensors copied unchanged)."""
    import gguf

    reader = gguf.GGUFReader(source)
    writer = gguf.GGUFWriter(str(dest), reader.fields["general.architecture"].contents())
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        value = change.get(key, field.contents())
        if value is None:
            continue
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            writer.add_key_value(key, value, vtype, sub_type=field.types[-1])
        else:
            writer.add_key_value(key, value, vtype)
    for key, value in change.items():
        if key not in reader.fields:
            writer.add_string(key, str(value))
    for tensor in reader.tensors:
        writer.add_tensor(tensor.name, tensor.data, raw_shape=tensor.data.shape)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return dest


def test_spec_changes_do_not_matter(tmp_path: Path, tiny_models: TinyModels) -> None:
    # Width, depth and weights are irrelevant to compatibility: only the vocabulary counts.
    wide = write_tiny_model(tmp_path / "wide.gguf", TinySpec(seed=9, n_embd=128, n_layer=3))
    assert check_compatible(tiny_models.target, wide).ok


@pytest.mark.real_model
def test_real_qwen_pair_is_compatible(real_pair: tuple[Path, Path]) -> None:
    target, draft = real_pair
    verdict = check_compatible(target, draft)
    assert verdict.ok, verdict.reason
    assert "151936 tokens" in verdict.reason


@pytest.mark.real_model
def test_real_target_against_tiny_draft_is_incompatible(
    real_pair: tuple[Path, Path], tiny_models: TinyModels
) -> None:
    verdict = check_compatible(real_pair[0], tiny_models.target)
    assert not verdict.ok
    assert verdict.reason.startswith("pre-tokenizers differ") or "differ" in verdict.reason
