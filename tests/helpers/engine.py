"""Helpers for engine tests: run a generation and collect what it emitted."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from specchat.engine.decoding.decoder import SpeculativeDecoder
from specchat.engine.session import ChatEngine
from specchat.engine.templates.chat_template import ChatMessage
from specchat.engine.types import Controls, GenerationRequest, RoundResult, SamplingParams

CHAT_PROMPTS = (
    "<|im_start|>user\nWrite a function that adds two numbers.<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nthe cat sat on the mat, the cat sat on the hat<|im_end|>\n"
    "<|im_start|>assistant\n",
    "hello world, hello there, hello again",
)


@dataclass(frozen=True)
class Run:
    """One generation's rounds and emitted tokens.

    Attributes:
        rounds: every RoundResult, the last one carrying the stop reason.
        tokens: emitted token ids in order.
        text: emitted text.
    """

    rounds: tuple[RoundResult, ...]

    @property
    def tokens(self) -> list[int]:
        return [e.token for r in self.rounds for e in r.events]

    @property
    def text(self) -> str:
        return "".join(e.text for r in self.rounds for e in r.events)

    @property
    def events(self) -> list:
        return [e for r in self.rounds for e in r.events]


def run(
    decoder: SpeculativeDecoder,
    prompt: Sequence[int],
    *,
    mode: str = "plain",
    k: int = 4,
    max_tokens: int = 64,
    sampling: SamplingParams = SamplingParams(),
    stop_strings: Sequence[str] = (),
) -> Run:
    request = GenerationRequest(
        prompt_tokens=tuple(prompt),
        max_tokens=max_tokens,
        controls=Controls(mode, k, sampling),
        stop_strings=tuple(stop_strings),
    )
    return Run(tuple(decoder.generate(request)))


def answer(
    engine: ChatEngine,
    messages: Sequence[ChatMessage],
    *,
    max_tokens: int,
    controls: Controls = Controls(),
) -> list[RoundResult]:
    """The rounds of the engine's answer to the last message (as the window and CLI ask)."""
    prepared = engine.prepare(messages, max_tokens=max_tokens)
    return list(engine.generate(GenerationRequest(prepared.tokens, max_tokens, controls)))
