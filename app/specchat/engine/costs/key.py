"""What a cost table is valid for: the key it is stored and found under."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from specchat.engine.llamacpp.model import LlamaModel


@dataclass(frozen=True)
class CostKey:
    """What a table is valid for: one model file, backend, thread count and context band
    (and, for a draft head, which head of that file).

    Attributes:
        file: the model file's resolved path.
        size: its size in bytes.
        mtime_ns: its modification time (a rewritten file is another model).
        backend: 'CPU' or the GPU backend, and the RPC servers the model's layers spread
            over ('CPU + RPC 10.0.0.2:50052'): a pass over the network costs more per pass
            and less per row, so each set of servers has tables of its own.
        threads: decode threads.
        ctx_band: the context window rounded up to a power of two (the KV cache's size
            changes attention kernels' shapes; nearby windows share a table).
        head: the drafter whose head over the target's hidden state the table times ("mtp":
            a target file's own MTP layers); "" for the model itself.
    """

    file: str
    size: int
    mtime_ns: int
    backend: str
    threads: int
    ctx_band: int
    head: str = ""

    @classmethod
    def of(cls, model: LlamaModel, *, head: str = "", file: Path | None = None) -> CostKey:
        """The key of `model`'s table, or of the table of its draft head named `head`
        whose weights come from `file` (the model's own by default): a head runs in the
        model's context, on its backend and threads."""
        path = Path(file if file is not None else model.info.path).resolve()
        stat = path.stat()
        remote = f" + RPC {model.info.remote}" if model.info.remote else ""
        return cls(
            file=str(path),
            size=stat.st_size,
            mtime_ns=stat.st_mtime_ns,
            backend=model.info.backend + remote,
            threads=model.info.n_threads,
            ctx_band=1 << max(0, math.ceil(math.log2(max(1, model.n_ctx)))),
            head=head,
        )

    def digest(self) -> str:
        fields = asdict(self)
        if not self.head:
            # A model's own key digests as it did before heads had tables: stored files keep
            # their names.
            del fields["head"]
        text = json.dumps(fields, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:20]


def pair_key(
    target: LlamaModel, draft: LlamaModel | None, heads: Mapping[str, Path]
) -> dict[str, object]:
    """What a pair's learnt estimates are valid for: its models' keys and each head's (by
    the drafter that drafts with it), as plain data. Another file for any of them, or
    another backend, thread count or context band, is another pair."""
    return {
        "target": asdict(CostKey.of(target)),
        "draft": asdict(CostKey.of(draft)) if draft is not None else None,
        "heads": {name: asdict(CostKey.of(target, head=name, file=f)) for name, f in heads.items()},
    }
