"""A streaming, validating GGUF header reader that refuses malformed files with a reason."""

from __future__ import annotations

import mmap
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specchat.models.gguf_format import SCALAR as _SCALAR
from specchat.models.gguf_format import U32 as _U32
from specchat.models.gguf_format import U64 as _U64
from specchat.models.gguf_format import Cursor as _Cursor
from specchat.models.gguf_format import GGUFError, ValueType
from specchat.models.gguf_format import read_value as _read_value
from specchat.models.gguf_format import value_type as _value_type

MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
#: llama.cpp's GGML_MAX_DIMS and GGML_MAX_NAME (a name must be shorter than this).
MAX_DIMS = 4
MAX_NAME = 64
#: Smallest possible encodings, used to refuse counts that could never fit in the file
#: before a single item is read (an inflated count must not make us loop for minutes).
_MIN_KV_BYTES = 8 + 4 + 1  # empty key, type, one-byte value
_MIN_TENSOR_INFO_BYTES = 8 + 4 + 4 + 8  # empty name, n_dims, type, offset (no dims)
_HEADER_BYTES = 4 + 4 + 8 + 8


@dataclass(frozen=True)
class GGUFMetadata:
    """The header and key-value section of a GGUF file.

    Attributes:
        path: the file read.
        version: GGUF version (2 or 3).
        tensor_count: tensors announced by the header.
        kv_count: key-value pairs announced by the header.
        file_size: size of the file in bytes.
        kv_end: offset just past the key-value section (where the tensor infos start).
        values: the metadata (only the requested keys when `keys` was given; no arrays when
            read by `validate`); string arrays are lists of str, numeric arrays tuples.
        types: the GGUF value type of every key read (all keys, requested or not).
        array_types: the element type of every array key.
        offsets: where each key's value starts in the file.
        array_lengths: the item count of every array key.
    """

    path: Path
    version: int
    tensor_count: int
    kv_count: int
    file_size: int
    kv_end: int
    values: Mapping[str, Any]
    types: Mapping[str, ValueType] = field(repr=False)
    array_types: Mapping[str, ValueType] = field(repr=False, default_factory=dict)
    offsets: Mapping[str, int] = field(repr=False, default_factory=dict)
    array_lengths: Mapping[str, int] = field(repr=False, default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self.values

    @property
    def architecture(self) -> str | None:
        value = self.values.get("general.architecture")
        return value if isinstance(value, str) else None

    @property
    def alignment(self) -> int:
        value = self.values.get("general.alignment", DEFAULT_ALIGNMENT)
        return int(value)


@dataclass(frozen=True)
class TensorInfo:
    """One tensor's entry in the header.

    Attributes:
        name: tensor name.
        shape: dimensions, innermost first (GGUF order).
        ggml_type: ggml type number.
        offset: offset of the data from the start of the data section.
        nbytes: size of the data.
    """

    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int
    nbytes: int


@dataclass(frozen=True)
class GGUFInfo:
    """A GGUF file whose whole header checked out.

    Attributes:
        metadata: header and key-value section (all keys).
        tensors: the tensor infos, in file order.
        data_offset: absolute offset of the (aligned) data section.
        data_size: bytes the tensors occupy in the data section, padding included.
    """

    metadata: GGUFMetadata
    tensors: tuple[TensorInfo, ...]
    data_offset: int
    data_size: int


def _open(path: Path) -> tuple[Any, mmap.mmap | bytes, int]:
    try:
        handle = open(path, "rb")  # noqa: SIM115 - closed by the caller's finally
    except OSError as error:
        raise GGUFError(f"cannot open {path}: {error.strerror or error}") from None
    size = path.stat().st_size
    if size < _HEADER_BYTES:
        handle.close()
        raise GGUFError(
            f"truncated: file is {size} bytes, smaller than a GGUF header ({_HEADER_BYTES})"
        )
    # A memory map reads only the pages the header touches, so the KV section of a
    # multi-gigabyte model costs what the KV section weighs, not the file.
    return handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ), size


def _parse_header(cur: _Cursor, path: Path) -> tuple[int, int, int]:
    magic = bytes(cur.buf[0:4])
    if magic != MAGIC:
        # People read this: name what the file is not, never a bytes value.
        raise GGUFError(
            "not a GGUF file (it does not start with the GGUF signature: another kind of "
            "file, or damaged)"
        )
    cur.pos = 4
    version = cur.u32("version")
    if version not in SUPPORTED_VERSIONS:
        raise GGUFError(f"unsupported: GGUF version {version} (SpecChat reads versions 2 and 3)")
    tensor_count = cur.u64("tensor count")
    kv_count = cur.u64("key-value count")
    left = cur.size - cur.pos
    if kv_count > left // _MIN_KV_BYTES:
        raise GGUFError(
            f"corrupt: header claims {kv_count} key-value pairs, "
            f"more than a {cur.size}-byte file can hold"
        )
    if tensor_count > left // _MIN_TENSOR_INFO_BYTES:
        raise GGUFError(
            f"corrupt: header claims {tensor_count} tensors, "
            f"more than a {cur.size}-byte file can hold"
        )
    return version, tensor_count, kv_count


@dataclass
class _KV:
    values: dict[str, Any] = field(default_factory=dict)
    types: dict[str, ValueType] = field(default_factory=dict)
    array_types: dict[str, ValueType] = field(default_factory=dict)
    offsets: dict[str, int] = field(default_factory=dict)
    array_lengths: dict[str, int] = field(default_factory=dict)


def _parse_kv(
    cur: _Cursor, kv_count: int, keys: Collection[str] | None, *, arrays: bool = True
) -> _KV:
    kv = _KV()
    values, types = kv.values, kv.types
    for index in range(kv_count):
        at = cur.pos
        key = cur.string(f"key {index}")
        if not key:
            raise GGUFError(f"corrupt: key {index} at offset {at} is empty")
        if key in types:
            raise GGUFError(f"corrupt: key {key!r} at offset {at} appears twice")
        vtype = _value_type(cur.u32(f"type of {key!r}"), f"key {key!r} at offset {at}")
        keep = keys is None or key in keys or key == "general.alignment"
        kv.offsets[key] = cur.pos
        if vtype is ValueType.ARRAY:
            cur.need(12, f"array type and length of {key!r}")
            kv.array_types[key] = _value_type(
                _U32.unpack_from(cur.buf, cur.pos)[0], f"array {key!r} at offset {cur.pos}"
            )
            kv.array_lengths[key] = int(_U64.unpack_from(cur.buf, cur.pos + 4)[0])
            # A Python tuple of a metadata array costs about 8x its bytes in the file:
            # validation checks arrays by their bounds and keeps none of them.
            keep = keep and arrays
        value = _read_value(cur, vtype, key, keep=keep)
        types[key] = vtype
        if keep:
            values[key] = value
    return kv


def _check_alignment(values: Mapping[str, Any], types: Mapping[str, ValueType]) -> None:
    if "general.alignment" not in types:
        return
    if types["general.alignment"] is not ValueType.UINT32:
        raise GGUFError("corrupt: general.alignment is not a uint32")
    alignment = values["general.alignment"]
    if alignment <= 0 or alignment & (alignment - 1):
        raise GGUFError(f"corrupt: general.alignment {alignment} is not a power of two")


def read_metadata(
    path: str | Path, *, keys: Collection[str] | None = None, arrays: bool = True
) -> GGUFMetadata:
    """Read the header and key-value section; with `keys`, keep only those values.

    Every length and count is checked against the file size before it is used, so a
    malformed file raises GGUFError instead of reading garbage or allocating wildly.
    With `arrays=False` no array value is kept (their types and lengths still are), so
    memory stays independent of the file's size.
    """
    path = Path(path)
    handle, buf, size = _open(path)
    try:
        cur = _Cursor(buf, size)
        version, tensor_count, kv_count = _parse_header(cur, path)
        wanted = None if keys is None else frozenset(keys)
        kv = _parse_kv(cur, kv_count, wanted, arrays=arrays)
        _check_alignment(kv.values, kv.types)
        return GGUFMetadata(
            path=path,
            version=version,
            tensor_count=tensor_count,
            kv_count=kv_count,
            file_size=size,
            kv_end=cur.pos,
            values=kv.values,
            types=kv.types,
            array_types=kv.array_types,
            offsets=kv.offsets,
            array_lengths=kv.array_lengths,
        )
    finally:
        if isinstance(buf, mmap.mmap):
            buf.close()
        handle.close()


#: Keys llama.cpp reads with accessors that abort the process (GGML_ASSERT) or read past
#: the array when the type is not the expected one: (value type, array element type).
_EXPECTED: dict[str, tuple[ValueType, ValueType | None]] = {
    "general.architecture": (ValueType.STRING, None),
    "tokenizer.ggml.model": (ValueType.STRING, None),
    "tokenizer.ggml.pre": (ValueType.STRING, None),
    "tokenizer.chat_template": (ValueType.STRING, None),
    "tokenizer.ggml.tokens": (ValueType.ARRAY, ValueType.STRING),
    "tokenizer.ggml.merges": (ValueType.ARRAY, ValueType.STRING),
    "tokenizer.ggml.token_type": (ValueType.ARRAY, ValueType.INT32),
    "tokenizer.ggml.scores": (ValueType.ARRAY, ValueType.FLOAT32),
}
#: Per-token arrays llama.cpp indexes by token id without checking their length.
_PER_TOKEN = ("tokenizer.ggml.token_type", "tokenizer.ggml.scores")


def _check_vocabulary(meta: GGUFMetadata, cur: _Cursor) -> None:
    """Refuse the vocabulary shapes that make llama.cpp abort instead of returning an error."""
    for key, (vtype, elem) in _EXPECTED.items():
        if key not in meta.types:
            continue
        if meta.types[key] is not vtype or (
            elem is not None and meta.array_types.get(key) is not elem
        ):
            want = vtype.name.lower() if elem is None else f"array of {elem.name.lower()}"
            raise GGUFError(f"corrupt: {key} must be a {want}")
    if "tokenizer.ggml.tokens" not in meta.types:
        return
    count = meta.array_lengths["tokenizer.ggml.tokens"]
    for key in _PER_TOKEN:
        if key in meta.types and meta.array_lengths[key] != count:
            length = meta.array_lengths[key]
            raise GGUFError(f"corrupt: {key} has {length} entries for {count} tokens")
    cur.pos = meta.offsets["tokenizer.ggml.tokens"] + 12
    # llama.cpp asserts that every token text is unique (id_to_token vs token_to_id sizes,
    # llama-vocab.cpp); a flipped bit that duplicates one would abort the whole app.
    _check_unique_tokens(cur, count)


def _token_texts(cur: _Cursor, count: int) -> Iterator[bytes]:
    """The vocabulary's `count` token texts from the cursor on, read without building a
    message per token (a vocabulary holds 150,000 of them); a text running past the file is
    refused with the message any string read gives, naming its token."""
    buf, size, unpack = cur.buf, cur.size, _U64.unpack_from
    pos = cur.pos
    for index in range(count):
        head = pos
        if head + 8 <= size:
            (length,) = unpack(buf, head)
            pos = head + 8 + length
        if head + 8 > size or pos > size:
            cur.pos = head
            cur.raw_string(f"token {index}")  # raises GGUFError
        yield buf[head + 8 : pos]
    cur.pos = pos


def _check_unique_tokens(cur: _Cursor, count: int) -> None:
    """Refuse a duplicated token text, holding one 8-byte hash per token, not the texts."""
    import numpy as np  # late, as in _type_sizes

    start = cur.pos
    digests = np.fromiter(map(hash, _token_texts(cur, count)), dtype=np.int64, count=count)
    digests.sort()
    colliding = set(digests[1:][digests[1:] == digests[:-1]].tolist())
    if not colliding:
        return
    cur.pos = start  # rare: compare the texts of the tokens whose hashes collide
    seen: dict[bytes, int] = {}
    for index, text in enumerate(_token_texts(cur, count)):
        if hash(text) in colliding and seen.setdefault(text, index) != index:
            raise GGUFError(
                f"corrupt: token {index} {text!r} duplicates token {seen[text]} "
                "(llama.cpp would abort on this vocabulary)"
            )


#: llama.cpp's LLAMA_MAX_LAYERS: more blocks than this is a GGML_ASSERT (llama-model.cpp).
MAX_LAYERS = 512
_INTEGERS = frozenset(t for t in _SCALAR if t.name.startswith(("UINT", "INT")))


def _check_hyperparameters(meta: GGUFMetadata) -> None:
    """Refuse layer and head counts that make llama.cpp abort (GGML_ASSERT) rather than fail.

    A bit flipped high in block_count trips LLAMA_MAX_LAYERS; in head_count or head_count_kv
    it overflows the K/V widths so the tensor shapes still check out and the first reshape
    of the graph aborts. Per-layer arrays (hybrid models) are left to llama.cpp.
    """
    arch = meta.architecture
    if arch is None:
        return

    def scalar(name: str) -> int | None:
        key = f"{arch}.{name}"
        if meta.types.get(key) not in _INTEGERS:
            return None
        return int(meta.get(key))

    layers = scalar("block_count")
    if layers is not None and not 1 <= layers <= MAX_LAYERS:
        raise GGUFError(
            f"corrupt: {arch}.block_count is {layers} (llama.cpp allows 1 to {MAX_LAYERS})"
        )
    heads, kv_heads = scalar("attention.head_count"), scalar("attention.head_count_kv")
    if heads and kv_heads is not None and (kv_heads < 1 or heads % kv_heads):
        raise GGUFError(
            f"corrupt: {arch}.attention.head_count_kv {kv_heads} does not divide head_count {heads}"
        )
    width = scalar("embedding_length")
    if heads and width and scalar("attention.key_length") is None and width % heads:
        raise GGUFError(
            f"corrupt: {arch}.embedding_length {width} is not a multiple of head_count {heads}"
        )


def _type_sizes() -> dict[int, tuple[int, int]]:
    # gguf's table of (block size, bytes per block), imported late: it drags in numpy.
    from gguf.constants import GGML_QUANT_SIZES

    return {int(kind): sizes for kind, sizes in GGML_QUANT_SIZES.items()}


def _iter_tensor_infos(
    cur: _Cursor, count: int, sizes: Mapping[int, tuple[int, int]]
) -> Iterator[tuple[str, tuple[int, ...], int, int, int, int]]:
    for index in range(count):
        at = cur.pos
        raw_name = cur.raw_string(f"name of tensor {index}")
        name = raw_name.decode("utf-8", errors="replace")
        if not raw_name:
            raise GGUFError(f"corrupt: tensor {index} at offset {at} has an empty name")
        if len(raw_name) >= MAX_NAME:
            raise GGUFError(
                f"corrupt: tensor {index} at offset {at} has a {len(raw_name)}-byte name "
                f"(llama.cpp's limit is {MAX_NAME - 1})"
            )
        n_dims = cur.u32(f"dimension count of tensor {name!r}")
        if not 1 <= n_dims <= MAX_DIMS:
            raise GGUFError(
                f"corrupt: tensor {name!r} at offset {at} has {n_dims} dimensions "
                f"(1 to {MAX_DIMS} allowed)"
            )
        shape = tuple(cur.u64(f"dimension {d} of tensor {name!r}") for d in range(n_dims))
        elements = 1
        for dim in shape:
            if dim <= 0:
                raise GGUFError(f"corrupt: tensor {name!r} has a dimension of {dim}")
            elements *= dim
            if elements >= 2**63:
                raise GGUFError(f"corrupt: tensor {name!r} has an absurd shape {shape}")
        ggml_type = cur.u32(f"type of tensor {name!r}")
        if ggml_type not in sizes:
            raise GGUFError(f"corrupt: tensor {name!r} has unknown ggml type {ggml_type}")
        block, type_size = sizes[ggml_type]
        if shape[0] % block:
            raise GGUFError(
                f"corrupt: tensor {name!r} row of {shape[0]} is not a multiple of its "
                f"type's block size {block}"
            )
        nbytes = elements // block * type_size
        offset = cur.u64(f"data offset of tensor {name!r}")
        yield name, shape, ggml_type, offset, nbytes, index


def validate(path: str | Path) -> GGUFInfo:
    """Check the whole header: key-values, tensor infos, and that all data lies in the file.

    Mirrors the checks llama.cpp's loader makes (and a few it makes too late, after it has
    already trusted a length), so a file that passes can be handed to llama.cpp.
    """
    path = Path(path)
    metadata = read_metadata(path, arrays=False)
    sizes = _type_sizes()
    handle, buf, size = _open(path)
    try:
        cur = _Cursor(buf, size)
        _check_vocabulary(metadata, cur)
        _check_hyperparameters(metadata)
        cur.pos = metadata.kv_end
        alignment = metadata.alignment
        tensors: list[TensorInfo] = []
        names: set[str] = set()
        expected_offset = 0
        for name, shape, ggml_type, offset, nbytes, index in _iter_tensor_infos(
            cur, metadata.tensor_count, sizes
        ):
            if name in names:
                raise GGUFError(f"corrupt: tensor name {name!r} appears twice")
            names.add(name)
            if offset % alignment:
                raise GGUFError(
                    f"corrupt: tensor {name!r} data offset {offset} is not aligned "
                    f"to {alignment} bytes"
                )
            # llama.cpp requires tensors packed in order, each padded to the alignment.
            if offset != expected_offset:
                raise GGUFError(
                    f"corrupt: tensor {index} {name!r} has data offset {offset}, "
                    f"expected {expected_offset}"
                )
            expected_offset += -(-nbytes // alignment) * alignment
            tensors.append(TensorInfo(name, shape, ggml_type, offset, nbytes))
        data_offset = -(-cur.pos // alignment) * alignment
        for tensor in tensors:
            end = data_offset + tensor.offset + tensor.nbytes
            if end > size:
                raise GGUFError(
                    f"truncated: data of tensor {tensor.name!r} ends at offset {end}, "
                    f"past end of file ({size} bytes)"
                )
        if not tensors and data_offset > size:
            raise GGUFError(f"truncated: data section at {data_offset} is past end of file")
        return GGUFInfo(
            metadata=metadata,
            tensors=tuple(tensors),
            data_offset=data_offset,
            data_size=expected_offset,
        )
    finally:
        if isinstance(buf, mmap.mmap):
            buf.close()
        handle.close()
