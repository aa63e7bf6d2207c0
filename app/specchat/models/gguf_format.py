"""GGUF's value types and bounds-checked reads of its encodings (no file or policy here)."""

from __future__ import annotations

import mmap
import struct
from enum import IntEnum
from typing import Any


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
SCALAR: dict[ValueType, tuple[str, int]] = {
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
U32 = struct.Struct("<I")
U64 = struct.Struct("<Q")


class Cursor:
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
        (value,) = U32.unpack_from(self.buf, self.pos)
        self.pos += 4
        return int(value)

    def u64(self, what: str) -> int:
        self.need(8, what)
        (value,) = U64.unpack_from(self.buf, self.pos)
        self.pos += 8
        return int(value)

    def raw_string(self, what: str) -> bytes:
        start = self.skip_string(what)
        return bytes(self.buf[start : self.pos])

    def string(self, what: str) -> str:
        # Metadata strings are UTF-8 by the spec; a stray byte is shown, never fatal here,
        # because llama.cpp itself stores byte-fallback tokens that need not be valid text.
        return self.raw_string(what).decode("utf-8", errors="replace")

    def skip_string(self, what: str) -> int:
        """Step over one string; returns where its bytes start."""
        start = self.pos
        length = self.u64(f"{what} length")
        if length > self.size - self.pos:
            raise GGUFError(
                f"truncated: {what} at offset {start} claims {length} bytes, "
                f"runs past end of file ({self.size} bytes)"
            )
        self.pos += length
        return self.pos - length


def value_type(raw: int, where: str) -> ValueType:
    try:
        return ValueType(raw)
    except ValueError:
        raise GGUFError(f"corrupt: {where} has unknown value type {raw}") from None


def read_value(cur: Cursor, vtype: ValueType, key: str, *, keep: bool) -> Any:
    """Read (or, when not `keep`, just bounds-check and skip) one value of type `vtype`."""
    if vtype in SCALAR:
        fmt, size = SCALAR[vtype]
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
    elem_type = value_type(cur.u32(f"array type of {key!r}"), f"array {key!r} at offset {at}")
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
        return read_string_array(cur, count, key)
    fmt, size = SCALAR[elem_type]
    if count > remaining // size:
        raise GGUFError(
            f"truncated: array {key!r} at offset {at} claims {count} items of {size} bytes, "
            f"runs past end of file ({cur.size} bytes)"
        )
    values = struct.unpack_from(f"<{count}{fmt}", cur.buf, cur.pos) if keep else None
    cur.pos += count * size
    return values


def read_string_array(cur: Cursor, count: int, key: str) -> list[str]:
    # The hot loop of a 150k-token vocabulary: locals only, one bound check per string.
    buf, size, pos = cur.buf, cur.size, cur.pos
    unpack = U64.unpack_from
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
