"""The loss ledger: where auto's replayed time goes beyond the ceiling's, by cause."""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from specchat.bench.hindsight.bounds import Oracle, Source
from specchat.bench.live.trace import AnswerTrace
from specchat.engine.costs.machine import MachineCosts
from specchat.engine.decoding.schedule import is_probe
from specchat.engine.drafting import needs_model, reads_target
from specchat.engine.types import RoundResult


class Cause(enum.Enum):
    """Why a round of `auto` took longer than the ceiling's way from the same position."""

    #: A plain round where the ceiling drafted (a copy or the draft model would have paid).
    PLAIN = enum.auto()
    #: All it drafted was kept and the same source would have kept more with a longer draft.
    SHORT = enum.auto()
    #: Rows paid for and not kept (drafted past the first miss, or where none paid).
    LONG = enum.auto()
    #: Another source (or plain) would have written the text from here in less time.
    SOURCE = enum.auto()
    #: A round the policy made to probe a drafter that kept nothing (its catch-up included).
    PROBE = enum.auto()
    #: The draft model catching up on text written while it sat out, less the ceiling's.
    ONE_OFF = enum.auto()
    #: A tree's rows off the path that was kept.
    TREE = enum.auto()
    #: What no round's choice explains: passes priced a token deeper than the replay's, rounds
    #: that beat every move the ceiling's records allow from where they began.
    OTHER = enum.auto()


#: Each cause as the ledger's table and replay.json name it.
LABELS = {
    Cause.PLAIN: "plain where a copy or draft paid",
    Cause.SHORT: "right source, K too short",
    Cause.LONG: "K too long: rows not kept",
    Cause.SOURCE: "wrong source",
    Cause.PROBE: "probes that found nothing",
    Cause.ONE_OFF: "one-off: draft model catch-up",
    Cause.TREE: "tree rows unused",
    Cause.OTHER: "other / order effects",
}
KEYS = {
    Cause.PLAIN: "plain_chosen",
    Cause.SHORT: "k_too_short",
    Cause.LONG: "k_too_long",
    Cause.SOURCE: "wrong_source",
    Cause.PROBE: "failed_probes",
    Cause.ONE_OFF: "one_off",
    Cause.TREE: "tree_rows_unused",
    Cause.OTHER: "other",
}

#: The kinds of columns (TraceColumn.kind) a round is compared with: a drafter that runs
#: the draft model with the model's, one that copies with every copy's; a head drafter with
#: its own column alone.
MODEL_KIND = "model"
COPY_KIND = "copy"


@dataclass(frozen=True)
class Ledger:
    """Auto's time over the ceiling's on one answer (or a set), split by cause.

    Attributes:
        gap_ms: auto's time less the ceiling's; the causes sum to it.
        ms: milliseconds by cause.
        readying_ms: the draft model's prompt read before the first round: outside auto's
            timed rounds (as the target's prompt read is), so in no cause and not in the gap.
    """

    gap_ms: float = 0.0
    ms: Mapping[Cause, float] = field(default_factory=dict)
    readying_ms: float = 0.0

    def share(self, cause: Cause) -> float | None:
        """`cause`'s part of the gap (None where there is no gap to share)."""
        if self.gap_ms <= 1e-9:
            return None
        return self.ms.get(cause, 0.0) / self.gap_ms

    def dominant(self) -> Cause:
        """The cause that cost the most."""
        return max(Cause, key=lambda cause: self.ms.get(cause, 0.0))

    def to_json(self) -> dict[str, object]:
        causes = {}
        for cause in Cause:
            share = self.share(cause)
            causes[KEYS[cause]] = {
                "ms": _rounded(self.ms.get(cause, 0.0), 2),
                "share": None if share is None else _rounded(share, 4),
            }
        return {
            "gap_ms": _rounded(self.gap_ms, 2),
            "causes": causes,
            "readying_ms": _rounded(self.readying_ms, 2),
        }

    @staticmethod
    def total(ledgers: Sequence[Ledger]) -> Ledger:
        """The ledgers of a set of answers added up."""
        return Ledger(
            sum(ledger.gap_ms for ledger in ledgers),
            {cause: sum(ledger.ms.get(cause, 0.0) for ledger in ledgers) for cause in Cause},
            sum(ledger.readying_ms for ledger in ledgers),
        )


def _rounded(value: float, digits: int) -> float:
    return round(value, digits) + 0.0  # never -0.0


def attribute(
    trace: AnswerTrace,
    costs: MachineCosts,
    rounds: Sequence[RoundResult],
    catchup_ms: Sequence[float],
    oracle: Oracle,
    *,
    readying_ms: float = 0.0,
) -> Ledger:
    """Charge auto's time over the ceiling's on `trace`, round by round, to causes.

    `rounds`: auto's rounds as the replay ran them under `costs` (the ceiling's costs);
    `catchup_ms`: each round's draft-model catch-up. With V(i) the least time from position
    i on (the ceiling's, catch-up free: Oracle.value), a round from i to j that took W
    spent W + V(j) − V(i) over the ceiling's way from where it began; over the rounds these
    add up to auto's time less V(0). Each round's part is split (docs/costs.md): its
    catch-up; the price of its pass here against the replay's; tree rows off the kept
    path; drafted rows not kept; and the rest, a round that drafted only what it kept
    against the ceiling's best move from i. V(0) is the ceiling less the catch-up it
    charges, which is taken off the one-off line: the causes add up to the gap.
    A head's round is charged as a draft model's is, at the head's price per token (it
    follows the target's cache: it never catches up).
    """
    start, tok = len(trace.prompt_tokens), costs.draft_token_ms or 0.0
    found = oracle.sources
    prices = {src.name: src.token_ms for src in found if src.column.kind == ""}
    loss = dict.fromkeys(Cause, 0.0)
    loss[Cause.ONE_OFF] = -oracle.catchup_ms
    i = 0
    spent = 0.0
    for r, catchup in zip(rounds, catchup_ms, strict=True):
        depth = start + i  # where the ceiling prices this position's pass
        d, a = r.drafted, r.accepted
        j = i + len(r.events)
        model_ms = r.draft_ms - catchup if drafts_cost(r.choice.mode) else 0.0
        spent += r.verify_ms + (r.draft_ms if drafts_cost(r.choice.mode) else 0.0)
        # The kept path's own pass as the ceiling prices it (the cheapest holding it); a
        # tree's pass held more rows: the branches not kept.
        linear = _price(costs, d + 1, depth)
        tree = 0.0
        if r.rows > d + 1:
            pass_ms = _price(costs, r.rows, depth, exact=True)
            linear = min(linear, pass_ms)
            tree = pass_ms - linear
        kept_pass = min(linear, _price(costs, a + 1, depth))
        kept_model = min(model_ms, a * prices.get(r.choice.mode, tok))
        unkept = (linear - kept_pass) + (model_ms - kept_model)
        # A round drafting only what was kept, then the ceiling's way from j, against the
        # ceiling's best move from i.
        base = kept_pass + kept_model
        rest = base + oracle.value[j] - oracle.value[i]
        # The pass the replay made against the ceiling's price for it (a token deeper in the
        # text; near the answer's end a pass the decoder may not grow to a cheaper size).
        loss[Cause.OTHER] += r.verify_ms - linear - tree
        if rest < 0:  # this round beat every move the ceiling's records allow from i
            loss[Cause.OTHER] += rest
            rest = 0.0
        one_off = catchup
        if d == 0:
            loss[Cause.PLAIN] += tree + unkept + rest
        elif is_probe(r.choice) and a == 0:
            # A probe that kept nothing was made for what it might teach: all of it.
            loss[Cause.PROBE] += catchup + tree + unkept + rest
            one_off = 0.0
        else:
            loss[Cause.TREE] += tree
            loss[Cause.LONG] += unkept
            cause, within = _same_source(oracle, found, r, i, j, base, rest)
            loss[cause] += within
            loss[Cause.SOURCE] += rest - within
        loss[Cause.ONE_OFF] += one_off
        i = j
    assert i == len(trace.answer), "auto's rounds must write the whole answer"
    return Ledger(spent - oracle.ms, loss, readying_ms)


def _same_source(
    oracle: Oracle,
    found: Sequence[Source],
    r: RoundResult,
    i: int,
    j: int,
    base: float,
    rest: float,
) -> tuple[Cause, float]:
    """The part of a drafting round's `rest` that its own kind of source (a copy, the
    draft model, or its own head) would have saved at another K, and which cause that is: a
    longer draft where all it drafted was kept (whatever stopped it: K, a confidence stop,
    the copy's end), a shorter one; after a rejected token a longer draft keeps nothing
    more, so a further-reaching move of the same kind is another proposal: another source."""
    mode = r.choice.mode
    kind = MODEL_KIND if needs_model(mode) else "" if reads_target(mode) else COPY_KIND
    same_kind = [src.name for src in found if src.column.kind == kind]
    names = (mode,) if kind == "" else same_kind
    moves = [oracle.best[i][s] for s in names if s in oracle.best[i]]
    if r.accepted == 0 or not moves:
        return Cause.SOURCE, 0.0
    same = min(moves, key=lambda move: move.total)
    within = min(max(0.0, base + oracle.value[j] - same.total), rest)
    if same.end > j and r.accepted == r.drafted:
        return Cause.SHORT, within
    if same.end < j:
        return Cause.LONG, within
    return Cause.SOURCE, within


def drafts_cost(mode: str) -> bool:
    """Whether `mode`'s drafts take a model's time (the draft model's, or a head's): a
    copy's search costs next to nothing."""
    return needs_model(mode) or reads_target(mode)


def _price(costs: MachineCosts, rows: int, depth: int, *, exact: bool = False) -> float:
    """A pass of `rows` at `depth`: the cheapest holding them, or (`exact`) exactly them."""
    ms = costs.target.cost_ms(rows, depth) if exact else costs.target.target_ms(rows, depth)
    assert ms is not None
    return ms


def ledger_lines(named: Sequence[tuple[str, Ledger]]) -> list[str]:
    """The ledger for the terminal: a row per cause, a column per answer (its share of that
    answer's gap), and the set's milliseconds and share."""
    whole = Ledger.total([ledger for _, ledger in named])
    names = [name for name, _ in named]
    widths = [max(len(name), 6) for name in names]
    label_width = max(len(label) for label in LABELS.values())
    head = " ".join(f"{name:>{w}}" for name, w in zip(names, widths, strict=True))
    lines = [
        "loss ledger: auto's time over the ceiling's, by cause "
        "(each answer: share of its gap; all: ms and share)",
        f"{'cause':<{label_width}} {head} {'all ms':>8} {'share':>6}",
    ]
    gaps = " ".join(f"{ledger.gap_ms:{w}.0f}" for (_, ledger), w in zip(named, widths, strict=True))
    lines.append(f"{'gap (auto − ceiling), ms':<{label_width}} {gaps} {whole.gap_ms:8.1f} {'':>6}")
    for cause in Cause:
        cells = " ".join(
            f"{percent(ledger.share(cause)):>{w}}"
            for (_, ledger), w in zip(named, widths, strict=True)
        )
        ms = whole.ms.get(cause, 0.0)
        ms = ms if abs(ms) >= 0.05 else 0.0  # never "-0.0"
        lines.append(
            f"{LABELS[cause]:<{label_width}} {cells} {ms:8.1f} {percent(whole.share(cause)):>6}"
        )
    if whole.readying_ms > 0:
        lines.append(
            f"readying the draft model before the first token: {whole.readying_ms:.1f} ms "
            "over the set (before auto's timed rounds, so in no cause)"
        )
    return lines


def percent(share: float | None) -> str:
    """A share for people ('–' where there is none)."""
    if share is None:
        return "–"
    return f"{share:.0%}" if abs(share) >= 0.005 else "0%"  # never "-0%"
