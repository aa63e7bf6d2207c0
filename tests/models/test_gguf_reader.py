"""The GGUF header reader: real metadata fast, and hundreds of malformed files refused or safe."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import textwrap
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from specchat.models.gguf_reader import GGUFError, read_metadata, validate
from specchat.tinymodels import TinyModels


def test_tiny_model_validates(tiny_models: TinyModels) -> None:
    info = validate(tiny_models.target)
    meta = info.metadata
    assert meta.version == 3
    assert meta.architecture == "llama"
    assert len(info.tensors) == meta.tensor_count == 21
    assert info.data_offset % meta.alignment == 0
    assert info.data_offset + info.data_size == meta.file_size
    # validate keeps no arrays, only their types and lengths.
    assert "tokenizer.ggml.tokens" not in meta
    assert meta.array_lengths["tokenizer.ggml.tokens"] == 3 + 256 + 10  # special, bytes, merges
    assert meta.get("tokenizer.ggml.add_bos_token") is False
    tokens = read_metadata(tiny_models.target).get("tokenizer.ggml.tokens")
    assert tokens[:3] == ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def test_keys_filter_reads_only_what_is_asked(tiny_models: TinyModels) -> None:
    meta = read_metadata(tiny_models.target, keys=["tokenizer.ggml.model"])
    assert meta.values == {"tokenizer.ggml.model": "gpt2"}
    assert "tokenizer.ggml.tokens" in meta.types  # walked and bounds-checked all the same


def test_not_a_gguf_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.gguf"
    path.write_bytes(b"PK\x03\x04" + b"\0" * 100)
    with pytest.raises(GGUFError, match="not a GGUF file"):
        read_metadata(path)


def test_empty_and_missing_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    with pytest.raises(GGUFError, match="truncated"):
        validate(empty)
    with pytest.raises(GGUFError, match="cannot open"):
        validate(tmp_path / "absent.gguf")


@pytest.mark.real_model
def test_real_metadata(real_pair: tuple[Path, Path]) -> None:
    target, _ = real_pair
    meta = read_metadata(target, keys=["tokenizer.ggml.tokens", "tokenizer.ggml.pre"])
    tokens = meta.get("tokenizer.ggml.tokens")
    assert len(tokens) == 151_936
    assert tokens[151_645] == "<|im_end|>"
    assert meta.get("tokenizer.ggml.pre") == "qwen2"
    info = validate(target)
    assert info.metadata.get("qwen2.block_count") == 28
    assert info.data_offset + info.data_size <= info.metadata.file_size


def _gguf_with(path: Path, key: str, elem_type: int, count: int, payload: bytes) -> Path:
    """A GGUF file with no tensors and one array key, written byte by byte."""
    name = key.encode()
    head = b"GGUF" + struct.pack("<IQQ", 3, 0, 1)
    head += struct.pack("<Q", len(name)) + name + struct.pack("<IIQ", 9, elem_type, count)
    data = head + payload
    path.write_bytes(data + b"\0" * (-len(data) % 32))
    return path


def _peak_bytes(path: Path) -> int:
    tracemalloc.start()
    try:
        validate(path)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_validate_does_not_materialise_big_arrays(tmp_path: Path) -> None:
    # 8 million uint8 items: as a tuple, 64 MB of references for an 8 MB file.
    count = 8_000_000
    path = _gguf_with(tmp_path / "numbers.gguf", "specchat.big", 0, count, bytes(count))
    validate(path)  # imports (numpy, gguf) out of the measurement
    assert _peak_bytes(path) < 2_000_000


def test_validate_checks_a_big_vocabulary_in_a_fraction_of_its_size(tmp_path: Path) -> None:
    # 500,000 distinct 8-byte token texts (8 MB): a list of str plus a dict of bytes would
    # take about 8 times that; one 8-byte hash per token takes about half.
    count = 500_000
    texts = np.char.zfill(np.arange(count).astype("U8"), 8).astype("S8").tobytes()
    records = np.zeros(count, dtype=[("length", "<u8"), ("text", "S8")])
    records["length"] = 8
    records["text"] = np.frombuffer(texts, dtype="S8")
    path = _gguf_with(tmp_path / "vocab.gguf", "tokenizer.ggml.tokens", 8, count, records.tobytes())
    validate(path)
    size = path.stat().st_size
    assert _peak_bytes(path) < size
    # The duplicate check still sees every token, the last one included.
    data = bytearray(path.read_bytes())
    last = data.rfind(b"00499999")
    data[last : last + 8] = b"00000000"  # token 499,999 becomes a copy of token 0
    path.write_bytes(bytes(data))
    with pytest.raises(GGUFError, match="token 499999 b'00000000' duplicates token 0"):
        validate(path)


# --- malformed variants -----------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """One malformed copy of the tiny model.

    Attributes:
        name: what was done to it.
        data: its bytes.
        kind: "truncate", "flip" or "inflate".
    """

    name: str
    data: bytes
    kind: str


def _layout(
    path: Path,
) -> tuple[list[tuple[str, int, int, int, int]], list[tuple[str, int, int]], int]:
    """Independent offsets from gguf's own reader (fine for a tiny file).

    Returns (kv, tensors, data_offset): kv entries are (key, key_len_pos, type_pos,
    value_pos, value_type); tensor entries (name, info_pos, absolute_data_pos).
    """
    from gguf import GGUFReader

    reader = GGUFReader(path)
    kv = []
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        key_len = int(field.parts[0][0])
        type_pos = field.offset + 8 + key_len
        kv.append((key, field.offset, type_pos, type_pos + 4, int(field.types[0])))
    tensors = [(t.name, t.field.offset, int(t.data_offset)) for t in reader.tensors]
    return kv, tensors, int(reader.data_offset)


def _put(data: bytes, pos: int, fmt: str, value: int) -> bytes:
    buf = bytearray(data)
    struct.pack_into("<" + fmt, buf, pos, value)
    return bytes(buf)


def _variants(path: Path) -> list[Variant]:
    original = path.read_bytes()
    size = len(original)
    kv, tensors, data_offset = _layout(path)
    out: list[Variant] = []

    # Truncations at every section boundary, inside every item, and at many offsets.
    cuts = {0, 3, 4, 7, 8, 15, 16, 23, 24, data_offset, data_offset + 1, size - 1}
    for _, key_pos, type_pos, value_pos, _ in kv:
        cuts.update({key_pos, key_pos + 4, key_pos + 9, type_pos, value_pos, value_pos + 5})
    for _, info_pos, data_pos in tensors:
        cuts.update({info_pos, info_pos + 9, data_pos, data_pos + 17})
    cuts.update(int(x) for x in np.linspace(1, size - 1, 60))
    out += [Variant(f"truncate@{cut}", original[:cut], "truncate") for cut in sorted(cuts)]

    # Random bit flips with a fixed seed: most in the header (where parsing can go wrong),
    # some in the tensor data (which must simply load).
    rng = np.random.default_rng(20_241_122)
    for index in range(120):
        end = data_offset if index < 100 else size
        start = 0 if index < 100 else data_offset
        pos = int(rng.integers(start, end))
        bit = int(rng.integers(0, 8))
        buf = bytearray(original)
        buf[pos] ^= 1 << bit
        out.append(Variant(f"flip@{pos}.{bit}", bytes(buf), "flip"))

    # Inflated counts and lengths, and absurd values in every kind of field.
    huge = 2**62
    out += [
        Variant("magic", b"GGUX" + original[4:], "inflate"),
        Variant("version=1", _put(original, 4, "I", 1), "inflate"),
        Variant("version=99", _put(original, 4, "I", 99), "inflate"),
        Variant("tensor_count=huge", _put(original, 8, "Q", huge), "inflate"),
        Variant("tensor_count+1", _put(original, 8, "Q", len(tensors) + 1), "inflate"),
        Variant("kv_count=huge", _put(original, 16, "Q", huge), "inflate"),
        Variant("kv_count+1", _put(original, 16, "Q", len(kv) + 1), "inflate"),
        Variant("kv_count-1", _put(original, 16, "Q", len(kv) - 1), "inflate"),
    ]
    for key, key_pos, type_pos, value_pos, vtype in kv:
        out.append(Variant(f"{key}:key_len=huge", _put(original, key_pos, "Q", huge), "inflate"))
        out.append(Variant(f"{key}:type=13", _put(original, type_pos, "I", 13), "inflate"))
        out.append(Variant(f"{key}:type=array", _put(original, type_pos, "I", 9), "inflate"))
        if vtype == 8:  # string
            out.append(Variant(f"{key}:len=huge", _put(original, value_pos, "Q", huge), "inflate"))
            (length,) = struct.unpack_from("<Q", original, value_pos)
            out.append(
                Variant(f"{key}:len+1", _put(original, value_pos, "Q", length + 1), "inflate")
            )
        if vtype == 9:  # array
            (count,) = struct.unpack_from("<Q", original, value_pos + 4)
            out.append(
                Variant(f"{key}:count=huge", _put(original, value_pos + 4, "Q", huge), "inflate")
            )
            out.append(
                Variant(f"{key}:count+1", _put(original, value_pos + 4, "Q", count + 1), "inflate")
            )
            out.append(Variant(f"{key}:elem=array", _put(original, value_pos, "I", 9), "inflate"))
            out.append(Variant(f"{key}:elem=99", _put(original, value_pos, "I", 99), "inflate"))
            first = value_pos + 12
            if struct.unpack_from("<I", original, value_pos)[0] == 8:
                out.append(
                    Variant(f"{key}[0]:len=huge", _put(original, first, "Q", huge), "inflate")
                )
    for name, info_pos, _ in tensors[:6]:
        (name_len,) = struct.unpack_from("<Q", original, info_pos)
        dims_pos = info_pos + 8 + name_len
        (n_dims,) = struct.unpack_from("<I", original, dims_pos)
        type_pos = dims_pos + 4 + 8 * n_dims
        offset_pos = type_pos + 4
        (offset,) = struct.unpack_from("<Q", original, offset_pos)
        out += [
            Variant(f"{name}:name_len=huge", _put(original, info_pos, "Q", huge), "inflate"),
            Variant(f"{name}:n_dims=5", _put(original, dims_pos, "I", 5), "inflate"),
            Variant(f"{name}:n_dims=0", _put(original, dims_pos, "I", 0), "inflate"),
            Variant(f"{name}:dim0=0", _put(original, dims_pos + 4, "Q", 0), "inflate"),
            Variant(f"{name}:dim0=huge", _put(original, dims_pos + 4, "Q", huge), "inflate"),
            Variant(
                f"{name}:dim0*2",
                _put(
                    original,
                    dims_pos + 4,
                    "Q",
                    2 * struct.unpack_from("<Q", original, dims_pos + 4)[0],
                ),
                "inflate",
            ),
            Variant(f"{name}:type=99", _put(original, type_pos, "I", 99), "inflate"),
            Variant(f"{name}:type=q4_0", _put(original, type_pos, "I", 2), "inflate"),
            Variant(f"{name}:offset+1", _put(original, offset_pos, "Q", offset + 1), "inflate"),
            Variant(f"{name}:offset+32", _put(original, offset_pos, "Q", offset + 32), "inflate"),
            Variant(f"{name}:offset=huge", _put(original, offset_pos, "Q", huge), "inflate"),
        ]
    return out


#: Loads each file given on stdin (one JSON list of paths) with llama.cpp, printing a line
#: before and after each, so the parent can tell which file killed the process if one does.
_LOADER = textwrap.dedent(
    """
    import json, sys
    from llama_cpp import Llama
    paths = json.loads(sys.stdin.read())
    for index, path in enumerate(paths):
        print("START", index, flush=True)
        try:
            llm = Llama(model_path=path, n_ctx=64, n_threads=1, verbose=False)
            tokens = llm.tokenize(b"hello world", add_bos=False, special=False)
            llm.eval(tokens[:4])
            llm.close()
            print("LOADED", index, flush=True)
        except Exception as error:
            print("REFUSED", index, type(error).__name__, flush=True)
    """
)


def _load_all_with_llama(paths: list[Path]) -> dict[int, str]:
    """Outcome per index: LOADED, REFUSED or CRASH (the process died on that file)."""
    outcome: dict[int, str] = {}
    start = 0
    while start < len(paths):
        batch = [str(p) for p in paths[start:]]
        result = subprocess.run(
            [sys.executable, "-c", _LOADER],
            input=json.dumps(batch),
            capture_output=True,
            text=True,
            timeout=600,
        )
        current = None
        for line in result.stdout.splitlines():
            word, _, rest = line.partition(" ")
            index = int(rest.split()[0]) + start if rest else None
            if word == "START":
                current = index
            elif word in ("LOADED", "REFUSED") and index is not None:
                outcome[index] = word
                current = None
        if current is None:
            break  # the batch ran to the end
        outcome[current] = f"CRASH (exit {result.returncode}): {result.stderr[-300:]}"
        start = current + 1
    return outcome


def test_malformed_variants_are_refused_or_load_safely(
    tiny_models: TinyModels, tmp_path: Path
) -> None:
    variants = _variants(Path(tiny_models.target))
    assert len(variants) >= 200
    last_tensor_end = (
        max(info.offset + info.nbytes for info in validate(tiny_models.target).tensors)
        + validate(tiny_models.target).data_offset
    )
    passed: list[tuple[Variant, Path]] = []
    refused = 0
    for number, variant in enumerate(variants):
        path = tmp_path / f"v{number:04d}.gguf"
        path.write_bytes(variant.data)
        try:
            validate(path)
        except GGUFError as error:
            refused += 1
            assert str(error), variant.name
            continue
        # A truncated file may only pass when nothing but trailing padding was cut.
        if variant.kind == "truncate":
            assert len(variant.data) >= last_tensor_end, variant.name
        passed.append((variant, path))

    outcome = _load_all_with_llama([path for _, path in passed])
    crashes = {passed[i][0].name: result for i, result in outcome.items() if "CRASH" in result}
    assert crashes == {}
    assert len(outcome) == len(passed)
    # Report the figures (pytest -rA / -s shows them; docs/reliability.md quotes them).
    loaded = sum(1 for result in outcome.values() if result == "LOADED")
    print(
        f"\nmalformed GGUF variants: {len(variants)} tried, {refused} refused by SpecChat, "
        f"{len(passed)} passed validation: {loaded} loaded and ran in llama.cpp, "
        f"{len(passed) - loaded} refused by llama.cpp, 0 crashes"
    )
