"""Where an answer's kept draft tokens came from, counted round by round."""

from __future__ import annotations

from dataclasses import dataclass

from specchat.engine.drafting.registry import mode_info
from specchat.engine.types import RoundResult

#: Joins the sources in the one-line summary.
SEPARATOR = " · "


@dataclass(frozen=True)
class KeptSource:
    """Draft tokens kept from one source.

    Attributes:
        source: for people: where a copying drafter found the draft ("this chat", "earlier
            chat", "attachment"), else the drafter ("draft model", "prompt lookup").
        tokens: how many of its draft tokens the target kept.
    """

    source: str
    tokens: int


def round_source(result: RoundResult) -> str:
    """Where the round's draft came from, in a few words (see KeptSource.source)."""
    # Every kept token of a round carries its draft's origin; a drafter that does not copy
    # from a source says none, and its name stands in.
    origin = next((e.origin for e in result.events if e.origin), "")
    if origin:
        article, _, rest = origin.partition(" ")
        return rest if article in ("a", "an", "the") and rest else origin
    try:
        label = mode_info(result.choice.mode).label
    except KeyError:
        return result.choice.mode
    # "Chain (lookup, then draft)" → "chain": the summary has room for names, not recipes.
    return label.split(" (")[0].lower()


class KeptSources:
    """One answer's kept draft tokens by source, fed its rounds in order.

    The counts are the rounds' own `accepted`, so they add up to the answer's Stats.accepted.
    """

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}

    def add(self, result: RoundResult) -> None:
        if result.accepted > 0:
            source = round_source(result)
            self._counts[source] = self._counts.get(source, 0) + result.accepted

    def counts(self) -> tuple[KeptSource, ...]:
        """The sources, most tokens first (ties: the one seen first)."""
        ordered = sorted(self._counts.items(), key=lambda item: -item[1])
        return tuple(KeptSource(source, tokens) for source, tokens in ordered)


def kept_summary(counts: tuple[KeptSource, ...]) -> str:
    """ "this chat 41 · earlier chat 23 · draft model 5", or "—" when nothing was kept."""
    return SEPARATOR.join(f"{k.source} {k.tokens}" for k in counts) or "—"
