"""Frozen value types shared by the engine, the workers, the CLI and the window."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field

#: How a CPU context's KV cache stores keys (setting model.kv_cache, --kv-cache): "q8_0"
#: makes a batch's rows bit-identical to single ones, so speculative output equals plain at
#: half the key memory; "f16" is llama.cpp's default, so plain output equals stock
#: llama.cpp's, while a verify pass can part from plain at a near-tie (docs/formats.md).
KV_CACHES = ("q8_0", "f16")

#: The highest sampling temperature SpecChat takes (OpenAI's API allows the same range);
#: above it an answer is noise.
MAX_TEMPERATURE = 2.0


class TokenKind(enum.Enum):
    """How an emitted token came to be."""

    ACCEPTED = enum.auto()  #: a draft token the target agreed with
    CORRECTED = enum.auto()  #: the target's token replacing the first rejected draft token
    BONUS = enum.auto()  #: the target's extra token after every draft token was kept
    PLAIN = enum.auto()  #: no draft that round: one ordinary target step


class StopReason(enum.Enum):
    """Why a generation ended."""

    EOS = "end of answer"
    MAX_TOKENS = "token limit reached"
    STOP_STRING = "stop string"
    CANCELLED = "stopped"
    CONTEXT_FULL = "context window full"


@dataclass(frozen=True)
class SamplingParams:
    """How logits become a probability vector.

    Attributes:
        temperature: 0 means greedy (argmax).
        top_k: keep the k most likely tokens (0 = all).
        top_p: keep the smallest set whose mass reaches top_p (1 = all).
        min_p: drop tokens below min_p times the top probability (0 = none).
        seed: seed of the sampling RNG; None draws one from the OS.
    """

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    seed: int | None = None

    def __post_init__(self) -> None:
        # Refused where a request is made, whoever makes it (window, CLI, API): a NaN
        # temperature turns every probability into NaN and the answer into one token repeated.
        problem = sampling_problem(self)
        if problem:
            raise ValueError(problem)

    @property
    def greedy(self) -> bool:
        return self.temperature <= 0.0


def _within(value: float, low: float, high: float) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and low <= value <= high


def sampling_problem(params: SamplingParams) -> str:
    """What is wrong with `params`, for people, or "" when nothing is."""
    if not _within(params.temperature, 0.0, MAX_TEMPERATURE):
        top = f"{MAX_TEMPERATURE:g}"
        return f"the temperature must be a number from 0 to {top} (got {params.temperature})"
    if not _within(params.top_p, 0.0, 1.0):
        return f"top-p must be a number from 0 to 1 (got {params.top_p})"
    if not _within(params.min_p, 0.0, 1.0):
        return f"min-p must be a number from 0 to 1 (got {params.min_p})"
    if isinstance(params.top_k, bool) or not isinstance(params.top_k, int) or params.top_k < 0:
        return f"top-k must be a whole number of at least 0 (got {params.top_k})"
    return ""


@dataclass(frozen=True)
class TokenEvent:
    """One emitted token.

    Attributes:
        kind: how it was made.
        token: token id.
        text: the text it completes, UTF-8 safe: a token that ends mid-character carries ""
            and the token completing the character carries all of it.
        p_target: the target's probability of this token (after sampling settings).
        p_draft: the drafter's probability (1.0 for a deterministic drafter; None when the
            token was not a draft).
        round_index: the round that emitted it.
        position: 0-based index within the round's draft (the bonus token has index K).
        margin: the target's top-1 minus top-2 logit at this position (how close a tie it was).
        origin: for a kept draft token of a drafter that copies, where it was found ("this
            chat", "an earlier chat", "an attachment"); "" otherwise.
    """

    kind: TokenKind
    token: int
    text: str
    p_target: float
    p_draft: float | None
    round_index: int
    position: int
    margin: float
    origin: str = ""


@dataclass(frozen=True)
class PolicyChoice:
    """What drafted this round and why.

    Attributes:
        mode: the drafter actually used (its name, or "plain"; never "auto").
        k: the draft length asked of it.
        reason: one line for people ("prompt lookup, K = 6: long match").
    """

    mode: str
    k: int
    reason: str


@dataclass(frozen=True)
class Stats:
    """Running totals of one generation.

    Attributes:
        rounds: target passes made.
        drafted: draft tokens proposed.
        accepted: draft tokens kept.
        emitted: tokens emitted (every kind).
        elapsed_s: wall time of decoding so far (prompt evaluation excluded).
        prompt_tokens: tokens evaluated for the prompt (after cache reuse).
        prompt_ms: prompt evaluation time.
        draft_ms: time spent drafting.
        verify_ms: time spent in target passes and verification.
        position_drafted: per draft position, how often a token was proposed there.
        position_accepted: per draft position, how often it was kept.
    """

    rounds: int = 0
    drafted: int = 0
    accepted: int = 0
    emitted: int = 0
    elapsed_s: float = 0.0
    prompt_tokens: int = 0
    prompt_ms: float = 0.0
    draft_ms: float = 0.0
    verify_ms: float = 0.0
    position_drafted: tuple[int, ...] = ()
    position_accepted: tuple[int, ...] = ()

    @property
    def alpha(self) -> float:
        """Acceptance rate: accepted ÷ drafted (0 when nothing was drafted)."""
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def tau(self) -> float:
        """Mean tokens emitted per target pass."""
        return self.emitted / self.rounds if self.rounds else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.emitted / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def position_rates(self) -> tuple[float, ...]:
        """Acceptance rate per draft position."""
        return tuple(
            a / d if d else 0.0
            for a, d in zip(self.position_accepted, self.position_drafted, strict=True)
        )


@dataclass(frozen=True)
class RoundResult:
    """Everything one round of speculation produced.

    Attributes:
        index: 0-based round number within the generation.
        events: the emitted tokens, in order.
        rejected: draft token ids thrown away at the first miss (and after it).
        rejected_text: their text, for ghost display.
        drafted: draft tokens proposed this round.
        accepted: draft tokens kept this round.
        draft_ms: time the drafter took.
        verify_ms: time of the target pass and verification.
        choice: the drafter and K used, and why.
        temperature: sampling temperature of this round.
        stats: running totals including this round.
        stop: set on the last round of a generation.
        text: the text this round added (concatenation of the events' text).
        rows: rows of the round's target pass (the last token, the draft and any branches
            of a tree); 0 for a round without one.
        draft: the draft token ids the target checked this round, in order (for a tree, the
            path it kept; with any rows auto filled): what a drafter proposed, round by
            round, for checks against other implementations' drafts.
    """

    index: int
    events: tuple[TokenEvent, ...]
    rejected: tuple[int, ...]
    rejected_text: str
    drafted: int
    accepted: int
    draft_ms: float
    verify_ms: float
    choice: PolicyChoice
    temperature: float
    stats: Stats
    stop: StopReason | None = None
    text: str = field(default="")
    rows: int = 0
    draft: tuple[int, ...] = ()


@dataclass(frozen=True)
class Controls:
    """The drafting and sampling controls: one value from the window's panel (or the CLI's
    options) to the decoder, which reads it again at each round's start.

    Attributes:
        mode: "auto", "plain" or a registered drafter's name (engine/drafting).
        k: draft length for fixed modes (auto chooses its own).
        sampling: sampling settings (temperature, top-p, ...).
    """

    mode: str = "auto"
    k: int = 4
    sampling: SamplingParams = SamplingParams()


@dataclass(frozen=True)
class GenerationRequest:
    """What to generate.

    Attributes:
        prompt_tokens: the full prompt (cached prefixes are reused automatically).
        max_tokens: longest answer.
        controls: mode, K and sampling at the start (they may change between rounds).
        stop_strings: the answer ends before any of these.
        conversation: which conversation the answer belongs to, where known (the store's
            id): a drafter that tells this chat from earlier ones starts a new "this chat"
            when it changes, even if the new chat opens with the same text.
        prediction: text the answer is expected to mostly repeat (an API request's
            Predicted Output, as tokens): a source to draft from for this answer only.
    """

    prompt_tokens: tuple[int, ...]
    max_tokens: int = 512
    controls: Controls = Controls()
    stop_strings: tuple[str, ...] = ()
    conversation: int | str | None = None
    prediction: tuple[int, ...] = ()


@dataclass(frozen=True)
class SpecialToken:
    """A token llama.cpp finds in a text by its spelling rather than by its tokenizer.

    Attributes:
        id: the token.
        control: a control (or unknown) token: parsed only where special tokens are
            asked for; a user-defined one (Gemma's turn markers) is parsed in any text.
        lstrip, rstrip: whitespace on that side of it is swallowed when it is parsed.
    """

    id: int
    control: bool
    lstrip: bool = False
    rstrip: bool = False
