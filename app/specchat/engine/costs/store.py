"""Cost tables on disk: one file per model, backend, thread count and context band."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from specchat.engine.costs.key import CostKey
from specchat.engine.costs.table import CONTEXT_TOKENS, MAX_ROWS, CostTable

if TYPE_CHECKING:
    from specchat.engine.llamacpp.model import LlamaModel


def new_table(model: LlamaModel, *, rows: int = MAX_ROWS) -> CostTable:
    """An empty table for `model` (sizes 1 … rows, capped by its batch and context)."""
    top = max(1, min(rows, model.n_batch, model.n_ctx - CONTEXT_TOKENS - 1))
    return CostTable(
        sizes=tuple(range(1, top + 1)),
        gpu=model.info.gpu_layers > 0,
        key=CostKey.of(model),
        description=model.info.description,
    )


def new_head_table(target: LlamaModel, head: str, file: Path) -> CostTable:
    """An empty table for the draft head of `target` that the drafter `head` drafts with,
    its weights read from `file` (one size: a drafted token)."""
    return CostTable(
        sizes=(1,),
        gpu=target.info.gpu_layers > 0,
        key=CostKey.of(target, head=head, file=file),
        description=f"{head} head of {target.info.description}",
    )


class CostStore:
    """Cost tables on disk, one JSON file per key, in the cache folder.

    Attributes:
        folder: where the files live.
    """

    def __init__(self, folder: Path | None = None) -> None:
        if folder is None:
            from specchat import paths

            folder = paths.cache_dir() / "costs"
        self.folder = folder

    def path(self, key: CostKey) -> Path:
        return self.folder / f"{key.digest()}.json"

    def load(self, model: LlamaModel, *, rows: int = MAX_ROWS) -> CostTable:
        """The stored table for `model` here, or a fresh one (a bad file is measured anew)."""
        return self.stored(new_table(model, rows=rows))

    def load_head(self, target: LlamaModel, head: str, file: Path) -> CostTable:
        """The stored table of `target`'s draft head for the drafter `head` (see
        new_head_table), or a fresh one."""
        return self.stored(new_head_table(target, head, file))

    def stored(self, fresh: CostTable) -> CostTable:
        """The table stored under `fresh`'s key with its sizes, else `fresh` itself."""
        assert fresh.key is not None
        try:
            data = json.loads(self.path(fresh.key).read_text(encoding="utf-8"))
            stored = CostTable.from_json(data)
        except (OSError, ValueError):
            return fresh
        if stored.key != fresh.key or stored.sizes != fresh.sizes:
            return fresh
        stored.gpu = fresh.gpu
        return stored

    def save(self, table: CostTable) -> None:
        """Write atomically: a crash mid-write leaves the old file, never half a table."""
        if table.key is None:
            raise ValueError("only a keyed table can be stored")
        self.folder.mkdir(parents=True, exist_ok=True)
        target = self.path(table.key)
        partial = target.with_suffix(".part")
        partial.write_text(json.dumps(table.to_json(), indent=1), encoding="utf-8")
        os.replace(partial, target)


def sizes_text(table: CostTable, sizes: Iterable[int] | None = None) -> list[str]:
    """Lines of `n  ms  ×one-token  per-row` for printing a table."""
    one = table.pass_ms.get(1)
    lines = []
    for n in sizes or table.sizes:
        ms = table.pass_ms.get(n)
        if ms is None:
            lines.append(f"{n:>3}  {'—':>9}")
            continue
        relative = f"{ms / one:6.2f}×" if one else ""
        mark = "" if table.pass_size(n) == n else f"  → pass of {table.pass_size(n)} costs less"
        lines.append(f"{n:>3}  {ms:7.1f} ms {relative} {ms / n:6.1f} ms/row{mark}")
    return lines
