"""A drafter's column in a recorded answer (bench/live/trace.py's AnswerTrace): what it would have
proposed at every position, recorded live, read back, played back in a replay and priced by
the ceiling. The bench reads every column through this class, by the drafter's name; the
drafters list theirs in `Listing.columns`."""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from specchat.engine.costs.priors import MAX_K

if TYPE_CHECKING:
    from specchat.engine.costs.machine import MachineCosts
    from specchat.engine.drafting.head_protocol import Head
    from specchat.engine.drafting.recorded import PlayedModel, RecordedCache, VirtualClock
    from specchat.engine.llamacpp.model import LlamaModel

#: Longest proposal recorded of a drafter that runs a model or a head: what `auto` may ask.
DRAFT_DEPTH = MAX_K


def agreement(proposal: Sequence[int], answer: Sequence[int]) -> int:
    """How many of `proposal` agree with `answer` from its start."""
    kept = 0
    while kept < len(proposal) and kept < len(answer) and proposal[kept] == answer[kept]:
        kept += 1
    return kept


def read_as_verified(proposal: Sequence[int], answer: Sequence[int]) -> tuple[int, ...]:
    """The proposal as far as greedy verification reads it: the agreeing run, then the first
    token that disagrees (the rest can never be kept)."""
    out = []
    for offered, written in zip(proposal, answer, strict=False):
        out.append(int(offered))
        if offered != written:
            break
    return tuple(out)


def renumbered_proposals(
    proposals: Sequence[Sequence[int]], renumber: Callable[[Sequence[int]], tuple[int, ...]]
) -> tuple[tuple[int, ...], ...]:
    return tuple(renumber(p) for p in proposals)


class RecordedAnswer(Protocol):
    """A recorded answer as the stand-ins read it (bench/live/trace.py's AnswerTrace).

    Attributes:
        prompt: the prompt's id.
        prompt_tokens: the prompt.
        answer: the target's tokens.
        columns: each drafter's column, by the drafter's name.
    """

    @property
    def prompt(self) -> str: ...

    @property
    def prompt_tokens(self) -> tuple[int, ...]: ...

    @property
    def answer(self) -> tuple[int, ...]: ...

    @property
    def columns(self) -> Mapping[str, TraceColumn]: ...


@dataclass(frozen=True, kw_only=True)
class Live:
    """What a live recording has to record columns with.

    Attributes:
        draft_model: the pair's draft model, or None.
        heads: each head over the target's hidden state, by the drafter that drafts with it.
        target: the model the heads follow (needed where there are heads).
    """

    draft_model: LlamaModel | None = None
    heads: Mapping[str, Head] | None = None
    target: LlamaModel | None = None


@dataclass(frozen=True)
class TraceColumn(abc.ABC):
    """One drafter's part of a recorded answer, by position (frozen: a trace compares equal
    to itself read back).

    A column is recorded live (`record`), written into and read from a trace's record
    (`to_record`, `from_record`: its own fields of the record), renumbered with the trace's
    tokens (`renumbered`), played back in a replay as what its drafter drafts with
    (`played_model`, `played_head`), and priced by the ceiling and the best fixed setting:
    at position i it offers up to `reach(i)` tokens (at most `max_k`), of which `kept(i,
    answer)` are kept, each drafted token costing `token_ms(costs)`. A column that derives
    from the text alone (the suffix index's) is made by `derive`, never recorded.

    Attributes:
        name: the drafter's name: the column's key in the trace, the ceiling's source.
    """

    #: Its place among the ceiling's sources: ties go to the first.
    order: ClassVar[int] = 100
    #: Whether its drafter must be kept in step with the text (the draft model's catch-up).
    catches_up: ClassVar[bool] = False
    #: Whether the best fixed setting tries its drafter at every K.
    fixed: ClassVar[bool] = True
    #: The most tokens the ceiling drafts from it in one round.
    max_k: ClassVar[int] = DRAFT_DEPTH
    #: The ceiling's sources whose rounds are of one kind: a round of a drafter of this kind
    #: is compared with the best of them ("copy", "model"; "" for the column's own name).
    kind: ClassVar[str] = ""
    #: Its fields of a trace's record, each also an attribute of the column (what
    #: AnswerTrace answers for it), with the value a trace without the column reads.
    fields: ClassVar[Mapping[str, Any]] = {}

    name: str

    @classmethod
    def record(
        cls, name: str, prompt: Sequence[int], answer: Sequence[int], live: Live
    ) -> TraceColumn | None:
        """This column recorded on a live answer (None: nothing to record with)."""
        return None

    @classmethod
    def from_record(cls, name: str, data: Mapping[str, Any]) -> TraceColumn | None:
        """This column read from a trace's record (None: the record holds none). Raises
        ValueError (KeyError and TypeError included) on a malformed one."""
        return None

    @classmethod
    def derive(cls, name: str, prompt: Sequence[int], answer: Sequence[int]) -> TraceColumn | None:
        """This column worked out from the text alone (None: it is recorded, not derived)."""
        return None

    def to_record(self) -> dict[str, Any]:
        """Its fields of the trace's record."""
        return {}

    def list_lengths(self) -> set[int]:
        """The length of each of its per-position lists (all equal the answer's)."""
        return set()

    def renumbered(self, renumber: Callable[[Sequence[int]], tuple[int, ...]]) -> TraceColumn:
        """The column with every token id renumbered (see bench/hindsight/replay.py's dense)."""
        return self

    @abc.abstractmethod
    def kept(self, i: int, answer: Sequence[int]) -> int:
        """How many of its proposal at position i the target keeps."""

    def reach(self, i: int) -> int:
        """The longest proposal it has at position i."""
        return self.max_k

    def token_ms(self, costs: MachineCosts) -> float | None:
        """A drafted token's time under `costs` (None: they do not price it, and the ceiling
        leaves the column out)."""
        return 0.0

    def played_model(
        self, trace: RecordedAnswer, costs: MachineCosts, clock: VirtualClock, n_vocab: int
    ) -> PlayedModel | None:
        """The draft model it plays back in a replay (None: it plays none)."""
        return None

    def played_head(
        self,
        trace: RecordedAnswer,
        costs: MachineCosts,
        target: RecordedCache,
        clock: VirtualClock,
        unseen: int,
    ) -> Head | None:
        """The head it plays back in a replay, over the recorded target's cache (None: it
        plays none)."""
        return None
