"""What one bench run measured: the variant timed, its record, each round's log."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Variant:
    """One thing to time: a mode and, for the fixed modes, its K (None for auto and plain)."""

    mode: str
    k: int | None

    @property
    def label(self) -> str:
        return self.mode if self.k is None else f"{self.mode} K={self.k}"


@dataclass(frozen=True)
class RoundLog:
    """One round, kept for analysis (what auto chose, and what each pass cost).

    Attributes:
        mode: the drafter used.
        k: the draft length asked.
        drafted, accepted: draft tokens proposed and kept.
        draft_ms, verify_ms: the round's timings.
        wall_ms: wall time from the previous round's end to this one's (Python overhead
            included).
        reason: the policy's reason.
        origin: where the draft was found, for a drafter that says ("this chat", ...).
    """

    mode: str
    k: int
    drafted: int
    accepted: int
    draft_ms: float
    verify_ms: float
    wall_ms: float
    reason: str
    origin: str = ""


@dataclass(frozen=True)
class RunRecord:
    """One generation, measured.

    Attributes:
        prompt: the prompt's id.
        category: its category.
        variant: mode and K.
        temperature: sampling temperature.
        repeat: repetition index.
        tokens: emitted token ids.
        margins: the target's top-1 − top-2 logit at each emitted token.
        text: the answer.
        elapsed_s: decode wall time (prompt evaluation excluded).
        ttft_ms: wall time from the generation request to its first token (prompt
            evaluation, the drafters' preparation and the first round).
        total_ms: wall time from the request to the last round.
        rounds, drafted, accepted: totals.
        draft_ms, verify_ms, prompt_ms: summed timings.
        position_drafted, position_accepted: per draft position counts.
        stop: why it ended.
        round_logs: one entry per round.
        turn: the turn of a session (0 for a single prompt).
        prompt_tokens: the prompt's length.
        prompt_evaluated: prompt tokens the turn evaluates with the turn before cached.
    """

    prompt: str
    category: str
    variant: Variant
    temperature: float
    repeat: int
    tokens: tuple[int, ...]
    margins: tuple[float, ...]
    text: str
    elapsed_s: float
    ttft_ms: float = 0.0
    total_ms: float = 0.0
    rounds: int = 0
    drafted: int = 0
    accepted: int = 0
    draft_ms: float = 0.0
    verify_ms: float = 0.0
    prompt_ms: float = 0.0
    position_drafted: tuple[int, ...] = ()
    position_accepted: tuple[int, ...] = ()
    stop: str = ""
    round_logs: tuple[RoundLog, ...] = field(default=(), repr=False)
    turn: int = 0
    prompt_tokens: int = 0
    prompt_evaluated: int = 0

    @property
    def tok_s(self) -> float:
        return len(self.tokens) / self.elapsed_s if self.elapsed_s > 0 else 0.0


def kept_by_source(record: RunRecord) -> dict[str, int]:
    """Draft tokens kept, by where they were found (the drafter's name when it does not say)."""
    kept: dict[str, int] = {}
    for log in record.round_logs:
        if log.accepted:
            source = log.origin or log.mode
            kept[source] = kept.get(source, 0) + log.accepted
    return kept
