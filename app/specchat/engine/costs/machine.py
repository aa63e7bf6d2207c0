"""A machine's prices for `auto`: the target's cost table, the draft's and the heads', and
what a draft model's catch-up costs; read from and written to cost files."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specchat.engine.costs.priors import UNMEASURED_CATCHUP_SHARE
from specchat.engine.costs.table import DRAFT_SIZES, FIRST_PASS_ROWS, CostTable, CostTableError

SCHEMA = 1


def estimate_catchup_ms(tokens: int, per_token_ms: float | None, draft: CostTable | None) -> float:
    """Estimated time for a draft model to evaluate `tokens` it has not seen, at a learnt
    `per_token_ms` (None before any catch-up was timed), else at the batched rate its
    `draft` table measured."""
    if tokens <= FIRST_PASS_ROWS:
        return 0.0  # the usual one or two: the round's first pass, priced by the draft's table
    if per_token_ms is None and draft is not None:
        per_token_ms = draft.catchup_row_ms
        if per_token_ms is None:
            # Before measuring: a batched catch-up costs a fraction of decoding token by token.
            per_token_ms = UNMEASURED_CATCHUP_SHARE * (draft.cost_ms(1) or 0.0)
    return (per_token_ms or 0.0) * tokens


@dataclass
class MachineCosts:
    """What `auto` prices a round with: the target's table, the draft's, and catch-up.

    Attributes:
        target: the target model's pass times by size.
        draft: the draft model's (DRAFT_SIZES: one drafted token, and a round's first pass
            of two rows), if there is a draft model.
        heads: each draft head's over the target's hidden state (size 1: one drafted token,
            one step of the head), by the name of the drafter that drafts with it.
        catchup_token_ms: milliseconds per token when the draft model evaluates text it has
            not seen in one batch (learnt from rounds; a share of a drafted token before).
        name: what machine the costs describe (for tables read from a file).
        sources: where the figures come from (for tables read from a file).
        context: tokens in the target's cache that the methods here price passes at (None:
            the table's own depth); the round loop prices each round at its own depth
            instead, through the policy's Pricer (engine/decoding/pricer.py).
    """

    target: CostTable
    draft: CostTable | None = None
    heads: dict[str, CostTable] = field(default_factory=dict)
    catchup_token_ms: float | None = None
    name: str = ""
    sources: tuple[str, ...] = ()
    context: int | None = None

    def target_ms(self, n: int) -> float | None:
        """Time to check n tokens in one target pass (the cheapest pass holding them)."""
        return self.target.target_ms(n, self.context)

    def price_list(self, limit: int) -> list[float] | None:
        """`target_ms(n)` for n = 1 … `limit`, by index (see CostTable.price_list)."""
        return self.target.price_list(limit, self.context)

    def pass_size(self, n: int) -> int:
        """Rows of the pass that checks n tokens (n, or a larger size that costs no more)."""
        return self.target.pass_size(n, self.context)

    def cost_ms(self, n: int) -> float | None:
        """A target pass over exactly n tokens (see CostTable.cost_ms)."""
        return self.target.cost_ms(n, self.context)

    @property
    def draft_token_ms(self) -> float | None:
        return None if self.draft is None else self.draft.cost_ms(1)

    def head_token_ms(self, name: str) -> float | None:
        """One drafted token of the head drafter `name` (None: no table, or nothing in it)."""
        table = self.heads.get(name)
        return None if table is None else table.cost_ms(1)

    def catchup_ms(self, tokens: int) -> float:
        """Estimated time for the draft model to evaluate `tokens` it has not seen."""
        return estimate_catchup_ms(tokens, self.catchup_token_ms, self.draft)

    def seed(
        self,
        batch_ms: Mapping[int, float],
        draft_token_ms: float | None = None,
        head_token_ms: Mapping[str, float] | None = None,
    ) -> None:
        """Pin target pass times (and a draft token's, and each head's drafted token's, by
        drafter) as if measured and seen in real rounds: for tests and tools."""
        self.target.pass_ms.update({int(n): float(ms) for n, ms in batch_ms.items()})
        self.target.seen.update(dict.fromkeys(map(int, batch_ms), 1))
        if draft_token_ms is not None:
            if self.draft is None:
                self.draft = CostTable(sizes=DRAFT_SIZES, gpu=self.target.gpu)
            self.draft.pass_ms[1] = float(draft_token_ms)
        for name, ms in (head_token_ms or {}).items():
            table = self.heads.setdefault(name, CostTable(sizes=(1,), gpu=self.target.gpu))
            table.pass_ms[1] = float(ms)

    def observe_batch(self, n: int, ms: float, context: int | None = None) -> None:
        """A real round's target pass of n rows took `ms` after `context` cached tokens (None:
        at `self.context`)."""
        self.target.observe(n, ms, self.context if context is None else context)

    # --- machine cost files (shipped profiles, `profile --out`, `bench --replay --costs`) ---
    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "name": self.name,
            "sources": list(self.sources),
            "target": self.target.to_json(),
            "draft": None if self.draft is None else self.draft.to_json(),
            "heads": {name: table.to_json() for name, table in sorted(self.heads.items())},
            "catchup_token_ms": self.catchup_token_ms,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, what: str = "cost file") -> MachineCosts:
        if not isinstance(data, Mapping) or data.get("schema") != SCHEMA:
            raise CostTableError(f"{what}: not a SpecChat cost file (schema {SCHEMA})")
        if not isinstance(data.get("target"), Mapping):
            raise CostTableError(f"{what}: no target table")
        target = CostTable.from_json(data["target"], what=f"{what} (target)")
        if 1 not in target.pass_ms:
            raise CostTableError(f"{what}: the target table has no pass of 1 token")
        draft = None
        if isinstance(data.get("draft"), Mapping):
            draft = CostTable.from_json(data["draft"], what=f"{what} (draft)")
        # A file written before heads had tables has none.
        heads = data.get("heads") or {}
        if not isinstance(heads, Mapping):
            raise CostTableError(f"{what}: `heads` must map drafters to tables")
        catchup = data.get("catchup_token_ms")
        return cls(
            target=target,
            draft=draft,
            heads={
                str(name): CostTable.from_json(table, what=f"{what} (head {name})")
                for name, table in heads.items()
            },
            catchup_token_ms=None if catchup is None else float(catchup),
            name=str(data.get("name", "")),
            sources=tuple(str(s) for s in data.get("sources", ())),
        )

    @classmethod
    def read(cls, path: Path) -> MachineCosts:
        """A cost file, with a clear message for a missing or malformed one."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as error:
            raise CostTableError(f"cannot read {path}: {error.strerror or error}") from None
        except ValueError as error:
            raise CostTableError(f"{path} is not JSON: {error}") from None
        return cls.from_json(data, what=str(path))
