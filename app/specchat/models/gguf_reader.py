"""A streaming, validating GGUF header reader that refuses malformed files with a reason."""

from __future__ import annotations

import mmap
import struct
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Any

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


class GGUFError(ValueError):
    """A GGUF file that is truncated, corrupt or absurd; the message says where and why."""


class ValueType(IntEnum):
    """GGUF metadata value types (the numbering is the file format's)."""

    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


#: struct format and size of each fixed-size scalar type.
_SCALAR: dict[ValueType, tuple[str, int]] = {
    ValueType.UINT8: ("B", 1),
    ValueType.INT8: ("b", 1),
    ValueType.UINT16: ("H", 2),
    ValueType.INT16: ("h", 2),
    ValueType.UINT32: ("I", 4),
    ValueType.INT32: ("i", 4),
    ValueType.FLOAT32: ("f", 4),
    ValueType.BOOL: ("?", 1),
    ValueType.UINT64: ("Q", 8),
    ValueType.INT64: ("q", 8),
    ValueType.FLOAT64: ("d", 8),
}
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


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
        values: the metadata (only the requested keys when `keys` was given); string arrays
            are lists of str, numeric arrays tuples.
        types: the GGUF value type of every key read (all keys, requested or not).
        array_types: the element type of every array key.
        offsets: where each key's value starts in the file.
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


class _Cursor:
    """Bounds-checked little-endian reads over a memory map."""

    def __init__(self, buffer: mmap.mmap | bytes, size: int) -> None:
        self.buf = buffer
        self.size = size
        self.pos = 0

    def need(self, nbytes: int, what: str) -> None:
        if nbytes < 0 or self.pos + nbytes > self.size:
            raise GGUFError(
                f"truncated: {what} at offset {self.pos} needs {nbytes} bytes, "
                f"runs past end of file ({self.size} bytes)"
            )

    def u32(self, what: str) -> int:
        self.need(4, what)
        (value,) = _U32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return int(value)

    def u64(self, what: str) -> int:
        self.need(8, what)
        (value,) = _U64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return int(value)

    def raw_string(self, what: str) -> bytes:
        start = self.pos
        length = self.u64(f"{what} length")
        if length > self.size - self.pos:
            raise GGUFError(
                f"truncated: {what} at offset {start} claims {length} bytes, "
                f"runs past end of file ({self.size} bytes)"
            )
        data = self.buf[self.pos : self.pos + length]
        self.pos += length
        return bytes(data)

    def string(self, what: str) -> str:
        # Metadata strings are UTF-8 by the spec; a stray byte is shown, never fatal here,
        # because llama.cpp itself stores byte-fallback tokens that need not be valid text.
        return self.raw_string(what).decode("utf-8", errors="replace")

    def skip_string(self, what: str) -> None:
        start = self.pos
        length = self.u64(f"{what} length")
        if length > self.size - self.pos:
            raise GGUFError(
                f"truncated: {what} at offset {start} claims {length} bytes, "
                f"runs past end of file ({self.size} bytes)"
            )
        self.pos += length


def _value_type(raw: int, where: str) -> ValueType:
    try:
        return ValueType(raw)
    except ValueError:
        raise GGUFError(f"corrupt: {where} has unknown value type {raw}") from None


def _read_value(cur: _Cursor, vtype: ValueType, key: str, *, keep: bool) -> Any:
    """Read (or, when not `keep`, just bounds-check and skip) one value of type `vtype`."""
    if vtype in _SCALAR:
        fmt, size = _SCALAR[vtype]
        cur.need(size, f"value of {key!r}")
        value = struct.unpack_from("<" + fmt, cur.buf, cur.pos)[0] if keep else None
        cur.pos += size
        return value
    if vtype is ValueType.STRING:
        if keep:
            return cur.string(f"string value of {key!r}")
        cur.skip_string(f"string value of {key!r}")
        return None
    # ARRAY
    at = cur.pos
    elem_type = _value_type(cur.u32(f"array type of {key!r}"), f"array {key!r} at offset {at}")
    count = cur.u64(f"array length of {key!r}")
    if elem_type is ValueType.ARRAY:
        # llama.cpp refuses nested arrays too; accepting them here would only defer the error.
        raise GGUFError(f"unsupported: array {key!r} at offset {at} holds arrays")
    remaining = cur.size - cur.pos
    if elem_type is ValueType.STRING:
        if count > remaining // 8:
            raise GGUFError(
                f"truncated: array {key!r} at offset {at} claims {count} strings, "
                f"more than the {remaining} bytes left in the file can hold"
            )
        if not keep:
            for index in range(count):
                cur.skip_string(f"string {index} of array {key!r}")
            return None
        return _read_string_array(cur, count, key)
    fmt, size = _SCALAR[elem_type]
    if count > remaining // size:
        raise GGUFError(
            f"truncated: array {key!r} at offset {at} claims {count} items of {size} bytes, "
            f"runs past end of file ({cur.size} bytes)"
        )
    values = struct.unpack_from(f"<{count}{fmt}", cur.buf, cur.pos) if keep else None
    cur.pos += count * size
    return values


def _read_string_array(cur: _Cursor, count: int, key: str) -> list[str]:
    # The hot loop of a 150k-token vocabulary: locals only, one bound check per string.
    buf, size, pos = cur.buf, cur.size, cur.pos
    unpack = _U64.unpack_from
    out: list[str] = []
    append = out.append
    for index in range(count):
        if pos + 8 > size:
            cur.pos = pos
            raise GGUFError(
                f"truncated: string {index} of array {key!r} at offset {pos} "
                f"runs past end of file ({size} bytes)"
            )
        (length,) = unpack(buf, pos)
        pos += 8
        end = pos + length
        if end > size:
            raise GGUFError(
                f"truncated: string {index} of array {key!r} at offset {pos - 8} claims "
                f"{length} bytes, runs past end of file ({size} bytes)"
            )
        append(buf[pos:end].decode("utf-8", errors="replace"))
        pos = end
    cur.pos = pos
    return out


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
        raise GGUFError(f"not a GGUF file: {path.name} starts with {magic!r}, not {MAGIC!r}")
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


def _parse_kv(cur: _Cursor, kv_count: int, keys: Collection[str] | None) -> _KV:
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
            cur.need(4, f"array type of {key!r}")
            kv.array_types[key] = _value_type(
                _U32.unpack_from(cur.buf, cur.pos)[0], f"array {key!r} at offset {cur.pos}"
            )
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


def read_metadata(path: str | Path, *, keys: Collection[str] | None = None) -> GGUFMetadata:
    """Read the header and key-value section; with `keys`, keep only those values.

    Every length and count is checked against the file size before it is used, so a
    malformed file raises GGUFError instead of reading garbage or allocating wildly.
    """
    path = Path(path)
    handle, buf, size = _open(path)
    try:
        cur = _Cursor(buf, size)
        version, tensor_count, kv_count = _parse_header(cur, path)
        wanted = None if keys is None else frozenset(keys)
        kv = _parse_kv(cur, kv_count, wanted)
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
    cur.pos = meta.offsets["tokenizer.ggml.tokens"] + 4
    count = cur.u64("token count")
    for key in _PER_TOKEN:
        if key in meta.types:
            cur_key = _Cursor(cur.buf, cur.size)
            cur_key.pos = meta.offsets[key] + 4
            length = cur_key.u64(f"length of {key}")
            if length != count:
                raise GGUFError(f"corrupt: {key} has {length} entries for {count} tokens")
    # llama.cpp asserts that every token text is unique (id_to_token vs token_to_id sizes,
    # llama-vocab.cpp); a flipped bit that duplicates one would abort the whole app.
    seen: dict[bytes, int] = {}
    for index in range(count):
        text = cur.raw_string(f"token {index}")
        previous = seen.setdefault(text, index)
        if previous != index:
            raise GGUFError(
                f"corrupt: token {index} {text!r} duplicates token {previous} "
                "(llama.cpp would abort on this vocabulary)"
            )


#: llama.cpp's LLAMA_MAX_LAYERS: more blocks than this is a GGML_ASSERT (llama-model.cpp).
MAX_LAYERS = 512
_INTEGERS = frozenset(
    {
        ValueType.UINT8, ValueType.INT8, ValueType.UINT16, ValueType.INT16,
        ValueType.UINT32, ValueType.INT32, ValueType.UINT64, ValueType.INT64,
    }
)  # fmt: skip


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
    metadata = read_metadata(path)
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
