"""Every drafter's proposal at every position of an answer, so any policy can be replayed.

A trace holds the answer and one column per drafter that records one (engine/drafting's
`Listing.columns`, keyed by the drafter's name): this module knows no drafter, only
columns."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from specchat.engine.drafting.trace_column import DRAFT_DEPTH, Live, TraceColumn, agreement

if TYPE_CHECKING:
    from specchat.engine.drafting.base import Head
    from specchat.engine.llamacpp.model import LlamaModel

__all__ = ["DRAFT_DEPTH", "AnswerTrace", "agreement", "column_kinds", "record_trace"]


def column_kinds() -> Iterator[tuple[str, type[TraceColumn]]]:
    """Every registered drafter's columns, as (drafter's name, column class), in the
    ceiling's order of sources (then the registry's)."""
    from specchat.engine.drafting.registry import drafter_classes

    kinds = [(cls.name, column) for cls in drafter_classes() for column in cls.listing.columns]
    return iter(sorted(kinds, key=lambda kind: kind[1].order))


def _columns_from(data: Mapping[str, Any]) -> dict[str, TraceColumn]:
    columns: dict[str, TraceColumn] = {}
    for name, kind in column_kinds():
        column = kind.from_record(name, data)
        if column is not None:
            columns[name] = column
    return columns


@dataclass(frozen=True, init=False)
class AnswerTrace:
    """One temperature-0 answer with what each drafter would have proposed at each position.

    At temperature 0 the text is the same whatever the policy (verification is exact), so a
    policy replayed on these records sees exactly the proposals it would have seen live; only
    the costs are priced anew.

    A column's fields are read as the trace's own (`trace.draft`, `trace.lookup_len`), and
    `trace.<name>_kept(i)` is how many of drafter <name>'s proposal at position i the target
    keeps; a trace is built from them too (`AnswerTrace(..., lookup=..., lookup_len=...)`,
    and `dataclasses.replace(trace, draft=...)`), each column taking its own fields.

    Attributes:
        prompt: the prompt's id.
        prompt_tokens: the prompt.
        answer: the target's tokens (plain decoding's answer).
        columns: each recording drafter's column, by the drafter's name.
        margins: per position, the target's top-1 − top-2 logit where it chose that token
            (how sure it was; None if not recorded).
    """

    prompt: str
    prompt_tokens: tuple[int, ...]
    answer: tuple[int, ...]
    columns: Mapping[str, TraceColumn] = field(default_factory=dict)
    margins: tuple[float, ...] | None = None

    def __init__(
        self,
        prompt: str,
        prompt_tokens: Sequence[int],
        answer: Sequence[int],
        columns: Mapping[str, TraceColumn] | None = None,
        margins: Sequence[float] | None = None,
        **fields: Any,
    ) -> None:
        """`fields`: columns' fields by name (`lookup=...`), over those of `columns`."""
        columns = dict(columns or {})
        if fields:
            record: dict[str, Any] = {}
            for column in columns.values():
                _merge(record, column.to_record())
            _merge(record, fields)
            columns = {name: c for name, c in columns.items() if not c.fields}
            columns.update(_columns_from(record))
        object.__setattr__(self, "prompt", prompt)
        object.__setattr__(self, "prompt_tokens", tuple(prompt_tokens))
        object.__setattr__(self, "answer", tuple(answer))
        object.__setattr__(self, "columns", columns)
        object.__setattr__(self, "margins", None if margins is None else tuple(margins))

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") or attr == "columns":
            raise AttributeError(attr)
        columns: Mapping[str, TraceColumn] = self.__dict__.get("columns", {})
        if attr.endswith("_kept") and attr[: -len("_kept")] in columns:
            column = columns[attr[: -len("_kept")]]
            return lambda i: column.kept(i, self.answer)
        found: Any = None
        known = False
        for _, kind in column_kinds():
            if attr in kind.fields:
                known = True
                found = _copy(kind.fields[attr]) if found is None else found
        for column in columns.values():
            if attr in column.fields:
                value = getattr(column, attr)
                found = {**found, **value} if isinstance(found, dict) and found else value
        if not known and found is None:
            raise AttributeError(attr)
        return found

    def kept(self, name: str, i: int) -> int:
        """How many of drafter `name`'s proposal at position i the target keeps."""
        return self.columns[name].kept(i, self.answer)

    def margin_before(self, i: int) -> float | None:
        """The target's margin on the token before position i (None: before the answer, or
        not recorded)."""
        return None if self.margins is None or i == 0 else self.margins[i - 1]

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "record": "trace",
            "prompt": self.prompt,
            "prompt_tokens": list(self.prompt_tokens),
            "answer": list(self.answer),
            "margins": None if self.margins is None else list(self.margins),
        }
        for name in sorted(self.columns):
            _merge(data, self.columns[name].to_record())
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AnswerTrace:
        """Raises ValueError (KeyError and TypeError included) on a malformed record."""
        answer = tuple(int(t) for t in data["answer"])
        margin = data.get("margins")
        margins = None if margin is None else tuple(float(m) for m in margin)
        columns = _columns_from(data)
        lengths = {len(answer)}
        for column in columns.values():
            lengths.update(column.list_lengths())
        if margins is not None:
            lengths.add(len(margins))
        if len(lengths) != 1:
            raise ValueError("per-position lists of different lengths")
        return cls(
            str(data["prompt"]),
            tuple(int(t) for t in data["prompt_tokens"]),
            answer,
            columns,
            margins,
        )


def _merge(record: dict[str, Any], fields: Mapping[str, Any]) -> None:
    """Fields into a record: a mapping merged into one there (the heads, by drafter)."""
    for key, value in fields.items():
        held = record.get(key)
        if isinstance(held, dict) and isinstance(value, Mapping):
            record[key] = {**held, **value}
        else:
            record[key] = value


def _copy(value: Any) -> Any:
    return dict(value) if isinstance(value, Mapping) else value


def record_trace(
    prompt_id: str,
    prompt: Sequence[int],
    answer: Sequence[int],
    *,
    draft_model: LlamaModel | None = None,
    heads: Mapping[str, Head] | None = None,
    target: LlamaModel | None = None,
    margins: Sequence[float] | None = None,
) -> AnswerTrace:
    """What every recording drafter would propose at every position of `answer` (lookup,
    the draft model, each head by the drafter that drafts with it: each column records
    itself, see engine/drafting/trace_column.py).

    `target`: the model the heads follow (their drafts are recorded after its cache).
    `margins`: the target's margin at each answer token, as the answer's run recorded them.
    """
    live = Live(draft_model=draft_model, heads=heads, target=target)
    columns: dict[str, TraceColumn] = {}
    for name, kind in column_kinds():
        column = kind.record(name, prompt, answer, live)
        if column is not None:
            columns[name] = column
    return AnswerTrace(
        prompt_id,
        tuple(prompt),
        tuple(answer),
        columns,
        None if margins is None else tuple(round(float(m), 4) for m in margins[: len(answer)]),
    )
