"""A chat's follow-up through `specchat serve`: the first request reads a long prefix (a
system prompt and a file), each next one repeats the chat with its answers and a short new
question; for each, its prompt tokens, those evaluated, and its time to the first streamed
token."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specchat.bench.api.via_api import ApiRefused, stream_completion
from specchat.bench.prompts import BenchPrompt
from specchat.engine.session import ChatEngine

#: The follow-up's goal: its first token within this many seconds (on the default pair).
FIRST_TOKEN_GOAL_S = 0.5


@dataclass(frozen=True)
class Turn:
    """One streamed request of a chat, as its client saw it.

    Attributes:
        prompt_tokens: the rendered prompt's length (usage.prompt_tokens).
        evaluated: prompt tokens evaluated for it (timings.prompt_n); the rest were cached
            (usage.prompt_tokens_details.cached_tokens).
        prompt_ms: the server's prompt evaluation time (timings.prompt_ms).
        first_token_s: from sending the request to the first chunk with text.
        tokens: answer tokens.
        text: the answer.
    """

    prompt_tokens: int
    evaluated: int
    prompt_ms: float
    first_token_s: float
    tokens: int
    text: str

    @property
    def cached(self) -> int:
        return self.prompt_tokens - self.evaluated

    def to_json(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "prompt_tokens_evaluated": self.evaluated,
            "cached_tokens": self.cached,
            "prompt_ms": round(self.prompt_ms, 1),
            "first_token_s": round(self.first_token_s, 4),
            "completion_tokens": self.tokens,
        }


@dataclass(frozen=True)
class FollowUp:
    """A session prompt's turns through the API.

    Attributes:
        prompt: the prompt's id.
        turns: every turn's request, the first (the prefix read) first.
    """

    prompt: str
    turns: tuple[Turn, ...]

    def to_json(self) -> dict[str, Any]:
        return {"prompt": self.prompt, "turns": [t.to_json() for t in self.turns]}


def stream_turn(
    host: str,
    port: int,
    messages: list[dict[str, str]],
    *,
    mode: str,
    max_tokens: int,
) -> Turn:
    """One streamed chat completion at T = 0, timed from outside as a client waits for it."""
    body = {
        "model": "bench",
        "messages": messages,
        "temperature": 0,
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        "speculative": {"mode": mode},
    }
    first: float | None = None
    text: list[str] = []
    usage: dict[str, Any] = {}
    timings: dict[str, Any] = {}

    def take(event: dict[str, Any]) -> None:
        nonlocal first, usage, timings
        for choice in event.get("choices", []):
            content = choice.get("delta", {}).get("content")
            if content:
                first = first if first is not None else time.perf_counter()
                text.append(content)
        timings = event.get("timings", timings)
        usage = event.get("usage") or usage

    began = stream_completion(host, port, body, take)
    if not usage or not timings:
        raise ApiRefused("the stream ended without its usage and timings")
    return Turn(
        prompt_tokens=int(usage["prompt_tokens"]),
        evaluated=int(timings["prompt_n"]),
        prompt_ms=float(timings["prompt_ms"]),
        first_token_s=(first if first is not None else time.perf_counter()) - began,
        tokens=int(usage["completion_tokens"]),
        text="".join(text),
    )


def measure_follow_ups(
    engine: ChatEngine,
    prompts: Sequence[BenchPrompt],
    *,
    mode: str = "auto",
    max_tokens: int = 128,
    progress: Callable[[int, int], None] | None = None,
) -> list[FollowUp]:
    """Each session prompt's turns, in order, through an API server on 127.0.0.1 over the
    engine, with the recent prefixes kept in memory as `specchat serve` keeps them; the
    engine stays open for the caller."""
    from specchat.engine.llamacpp.prefix_cache import PrefixCache
    from specchat.serve.guard import ServeOptions
    from specchat.serve.server import ApiServer

    server = ApiServer.for_engine(
        engine, ServeOptions(port=0), calibrate_plain=False, profile=False, prefixes=PrefixCache()
    )
    address = server.start()
    results: list[FollowUp] = []
    total = sum(p.turn_count for p in prompts)
    done = 0
    try:
        for prompt in prompts:
            answers: list[str] = []
            turns: list[Turn] = []
            for number in range(prompt.turn_count):
                try:
                    turn = stream_turn(
                        address.host,
                        address.port,
                        prompt.messages(answers),
                        mode=mode,
                        max_tokens=max_tokens,
                    )
                except ApiRefused as error:
                    raise ApiRefused(f"{prompt.id}, turn {number}: {error}") from None
                turns.append(turn)
                answers.append(turn.text)
                done += 1
                if progress is not None:
                    progress(done, total)
            results.append(FollowUp(prompt.id, tuple(turns)))
    finally:
        server.stop()
    return results


def write_follow_ups(results: Sequence[FollowUp], out: Path) -> dict[str, Any]:
    """`follow-up.json` in `out`: every turn's figures and the follow-ups' slowest first
    token against the goal."""
    later = [t for r in results for t in r.turns[1:]]
    slowest = max((t.first_token_s for t in later), default=0.0)
    report = {
        "goal": f"a follow-up's first token within {FIRST_TOKEN_GOAL_S} s",
        "slowest_follow_up_first_token_s": round(slowest, 4),
        "result": "PASS" if later and slowest < FIRST_TOKEN_GOAL_S else "FAIL",
        "prompts": [r.to_json() for r in results],
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "follow-up.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    return report
