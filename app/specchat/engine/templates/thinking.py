"""Where a model's thinking begins and ends in its answer, as its chat template marks it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ThinkingMarkers:
    """The texts a family writes around its thinking.

    Attributes:
        open: what opens a thinking block.
        close: what closes it.
    """

    open: str
    close: str


#: The families' thinking markers: the one table the answers' readers build their
#: ThinkingSyntax values from (host/answer_format/formats.py, ThinkingSyntax.of).
#: Qwen3 / 3.5, DeepSeek R1, GLM and most others write `<think>…</think>`.
THINK_TAGS = ThinkingMarkers("<think>", "</think>")
#: Gemma 4 opens its thought channel with `<|channel>thought`.
GEMMA4_CHANNEL = ThinkingMarkers("<|channel>thought", "<channel|>")
#: Magistral and Ministral 3.
MISTRAL_TAGS = ThinkingMarkers("[THINK]", "[/THINK]")
#: Seed-OSS.
SEED_TAGS = ThinkingMarkers("<seed:think>", "</seed:think>")
#: Cohere Command R7B and North.
COHERE_TAGS = ThinkingMarkers("<|START_THINKING|>", "<|END_THINKING|>")
#: MiniMax M3.
MINIMAX_M3_TAGS = ThinkingMarkers("<mm:think>", "</mm:think>")
#: Apriel 1.6: its assistant turn is reasoning until `[BEGIN FINAL RESPONSE]`.
APRIEL16_TAGS = ThinkingMarkers("<|begin_assistant|>", "[BEGIN FINAL RESPONSE]")
#: Those an answer may open with, longest first where one begins another: Gemma's comes
#: before `<think>` (a `<think>` family's template may quote a channel in a comment).
KNOWN_MARKERS = (
    GEMMA4_CHANNEL,
    THINK_TAGS,
    MISTRAL_TAGS,
    SEED_TAGS,
    COHERE_TAGS,
    MINIMAX_M3_TAGS,
    APRIEL16_TAGS,
)
