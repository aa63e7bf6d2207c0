"""What a head over the target's hidden state keeps between its catch-ups and beside a kept
target state: the target calls it has not been fed, and its whole state, in memory or in a
file beside a kept conversation (engine/llamacpp/kv_store.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class KeptCall:
    """One target call the head kept but has not been fed: its positions, tokens and what
    the head reads of it, a row per token."""

    start: int
    tokens: list[int]
    data: np.ndarray

    def cut(self, n: int) -> KeptCall:
        return KeptCall(self.start, self.tokens[:n], self.data[:n])


def merged(calls: Sequence[KeptCall], limit: int) -> list[KeptCall]:
    """Contiguous calls joined, in pieces of at most `limit` rows."""
    joined: list[KeptCall] = []
    for call in calls:
        last = joined[-1] if joined else None
        if last is not None and last.start + len(last.tokens) == call.start:
            data = np.concatenate([last.data, call.data])
            joined[-1] = KeptCall(last.start, last.tokens + call.tokens, data)
        else:
            joined.append(call)
    pieces: list[KeptCall] = []
    for call in joined:
        for begin in range(0, len(call.tokens), max(1, limit)):
            end = begin + max(1, limit)
            pieces.append(
                KeptCall(call.start + begin, call.tokens[begin:end], call.data[begin:end])
            )
    return pieces


@dataclass(frozen=True)
class HeadState:
    """A head as it was beside a kept target state (see HiddenStateHead.state).

    Attributes:
        covered: target positions it held or had kept.
        fed_end: positions its own cache held.
        cache: llama.cpp's state of its own cache (empty: it keeps none).
        unfed: the calls it had kept but not been fed.
        fields: its kind's bookkeeping.
        source: which head kept it (its drafter and weights file, see
            HiddenStateHead.source): another head never adopts it.
    """

    covered: int
    fed_end: int
    cache: bytes
    unfed: tuple[KeptCall, ...]
    fields: dict[str, Any]
    source: str = ""

    @property
    def size_bytes(self) -> int:
        """Memory it holds: the head's cache and the rows it has yet to be fed."""
        return len(self.cache) + sum(call.data.nbytes for call in self.unfed)


def save_head_state(state: HeadState, path: Path) -> int:
    """Write `state` to `path` (NumPy's npz, no pickles); its bytes."""
    arrays: dict[str, np.ndarray] = {
        "covered": np.asarray(state.covered),
        "source": np.asarray(state.source),
        "fed_end": np.asarray(state.fed_end),
        "cache": np.frombuffer(state.cache, dtype=np.uint8),
        "unfed.starts": np.asarray([c.start for c in state.unfed], dtype=np.int64),
        "unfed.lengths": np.asarray([len(c.tokens) for c in state.unfed], dtype=np.int64),
        "unfed.tokens": np.asarray([t for c in state.unfed for t in c.tokens], dtype=np.int64),
    }
    if state.unfed:
        arrays["unfed.data"] = np.concatenate([c.data for c in state.unfed])
    for name, value in state.fields.items():
        if value is None:
            arrays[f"none.{name}"] = np.zeros(0)
        elif isinstance(value, dict):
            positions = sorted(value)
            arrays[f"rows.{name}.positions"] = np.asarray(positions, dtype=np.int64)
            if positions:
                arrays[f"rows.{name}"] = np.stack([value[p] for p in positions])
        else:
            arrays[f"value.{name}"] = np.asarray(value)
    with path.open("wb") as file:
        np.savez(file, **arrays)  # type: ignore[arg-type]
    return path.stat().st_size


def load_head_state(path: Path) -> HeadState | None:
    """What save_head_state wrote (None: no file, or one that does not read whole)."""
    try:
        with np.load(path, allow_pickle=False) as saved:
            arrays = {name: saved[name] for name in saved.files}
        fields: dict[str, Any] = {}
        for name, value in arrays.items():
            kind, _, field = name.partition(".")
            if kind == "none":
                fields[field] = None
            elif kind == "value":
                fields[field] = value if value.ndim else value.item()
            elif kind == "rows" and field.endswith(".positions"):
                key = field.removesuffix(".positions")
                positions = value.tolist()
                rows = arrays[f"rows.{key}"] if positions else np.zeros((0, 0))
                fields[key] = {p: rows[i] for i, p in enumerate(positions)}
        unfed: list[KeptCall] = []
        offset = 0
        tokens = arrays["unfed.tokens"].tolist()
        for start, length in zip(
            arrays["unfed.starts"].tolist(), arrays["unfed.lengths"].tolist(), strict=True
        ):
            data = arrays["unfed.data"][offset : offset + length]
            unfed.append(KeptCall(start, tokens[offset : offset + length], data))
            offset += length
        return HeadState(
            covered=int(arrays["covered"]),
            fed_end=int(arrays["fed_end"]),
            cache=arrays["cache"].tobytes(),
            unfed=tuple(unfed),
            fields=fields,
            source=str(arrays["source"]) if "source" in arrays else "",
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
