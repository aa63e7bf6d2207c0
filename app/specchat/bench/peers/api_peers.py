"""`specchat bench --via-api --peers`: `specchat serve` and llama-server answering the same
requests through the same official `openai` client, a whole-file edit's Predicted Output
included (llama-server is sent it too; it drafts with its own speculative type instead).
Every llama-server type runs, and the report names the best, chosen knowing the results."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specchat.bench.peers.configs import PeerConfig
from specchat.bench.peers.llama_server import LlamaServer, ServerSettings
from specchat.bench.peers.server_process import ChatReply, PeerError
from specchat.bench.prompts import BenchPrompt

SPECCHAT_SERVE = "specchat serve (auto)"


@dataclass(frozen=True)
class ApiAnswer:
    """One request's answer through the `openai` client.

    Attributes:
        server: who answered.
        prompt: the prompt's id.
        tokens: usage.completion_tokens.
        wall_s: from sending the request to the whole reply (prompt reading included: what
            the client waits for).
        decode_tok_s: decode speed from the server's own timings (tokens after the first
            over the time after the first for llama-server: ChatReply.decode_tok_s).
        text: the answer.
        kept_prediction: usage.completion_tokens_details.accepted_prediction_tokens.
        error: why there is no answer ("" when there is one).
    """

    server: str
    prompt: str
    tokens: int = 0
    wall_s: float = 0.0
    decode_tok_s: float = 0.0
    text: str = ""
    kept_prediction: int = 0
    error: str = ""

    @property
    def tok_s(self) -> float:
        return self.tokens / self.wall_s if self.wall_s > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "prompt": self.prompt,
            "tokens": self.tokens,
            "wall_s": round(self.wall_s, 4),
            "tok_s": round(self.tok_s, 3),
            "decode_tok_s": round(self.decode_tok_s, 3),
            "accepted_prediction_tokens": self.kept_prediction,
            "error": self.error,
        }


def ask(
    port: int, server: str, prompt: BenchPrompt, *, max_tokens: int, llama_server: bool
) -> ApiAnswer:
    """One greedy request through the `openai` client, its Predicted Output included."""
    import openai

    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="bench")
    extra: dict[str, Any] = {}
    if prompt.prediction:
        extra["prediction"] = {"type": "content", "content": prompt.prediction}
    try:
        began = time.perf_counter()
        reply = client.chat.completions.create(
            model="bench",
            messages=prompt.messages(),  # type: ignore[arg-type]
            max_tokens=max_tokens,
            temperature=0,
            **extra,
        )
        wall = time.perf_counter() - began
    except openai.OpenAIError as error:
        return ApiAnswer(server, prompt.id, error=str(error)[:300])
    finally:
        client.close()
    usage = reply.usage
    details = usage.completion_tokens_details if usage else None
    timings: Mapping[str, Any] = (reply.model_extra or {}).get("timings") or {}
    text = reply.choices[0].message.content or ""
    timed = ChatReply(text, timings, wall, first_pass_timed=not llama_server)
    return ApiAnswer(
        server,
        prompt.id,
        tokens=usage.completion_tokens if usage else 0,
        wall_s=wall,
        decode_tok_s=timed.decode_tok_s,
        text=text,
        kept_prediction=int((details.accepted_prediction_tokens or 0) if details else 0),
    )


def compare_servers(
    specchat_port: int,
    configs: Sequence[PeerConfig],
    prompts: Sequence[BenchPrompt],
    settings: ServerSettings,
    binary: Any,
    *,
    max_tokens: int,
    repeat: int = 1,
    progress: Callable[[str], None] | None = None,
) -> list[ApiAnswer]:
    """Every prompt through `specchat serve` (already listening on `specchat_port`) and
    through each llama-server configuration, `repeat` times."""
    answers: list[ApiAnswer] = []
    for _ in range(repeat):
        if progress:
            progress(SPECCHAT_SERVE)
        answers += [
            ask(specchat_port, SPECCHAT_SERVE, p, max_tokens=max_tokens, llama_server=False)
            for p in prompts
        ]
        for config in configs:
            if not config.is_server:
                continue
            assert config.server_args is not None
            if progress:
                progress(config.name)
            try:
                with LlamaServer(binary, settings, config.server_args) as server:
                    answers += [
                        ask(server.port, config.name, p, max_tokens=max_tokens, llama_server=True)
                        for p in prompts
                    ]
            except PeerError as error:
                answers += [ApiAnswer(config.name, p.id, error=str(error)[:300]) for p in prompts]
    return answers


def _geomean(values: Sequence[float]) -> float:
    values = [v for v in values if v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else 0.0


def summarise(answers: Sequence[ApiAnswer]) -> dict[str, Any]:
    """Each server's geometric mean tokens/s (wall) per prompt and over the set, the best
    llama-server, and SpecChat over it per prompt."""
    servers = list(dict.fromkeys(a.server for a in answers))
    prompts = list(dict.fromkeys(a.prompt for a in answers))
    speed = {
        (s, p): _geomean([a.tok_s for a in answers if a.server == s and a.prompt == p])
        for s in servers
        for p in prompts
    }
    per_set = {s: _geomean([speed[(s, p)] for p in prompts]) for s in servers}
    rivals = {s: v for s, v in per_set.items() if s != SPECCHAT_SERVE and v > 0}
    best = max(rivals, key=lambda s: rivals[s]) if rivals else None
    over_best = {
        p: round(speed[(SPECCHAT_SERVE, p)] / speed[(best, p)], 4)
        for p in prompts
        if best and speed[(best, p)] > 0 and speed[(SPECCHAT_SERVE, p)] > 0
    }
    same = {
        p: all(
            a.text == b.text
            for a in answers
            if a.server == SPECCHAT_SERVE and a.prompt == p
            for b in answers
            if b.server == best and b.prompt == p
        )
        for p in prompts
    }
    return {
        "tok_s": {s: round(v, 3) for s, v in per_set.items()},
        "best_llama_server": best,
        "best_chosen": "knowing the results: the llama-server type fastest over this set",
        "specchat_over_best": over_best,
        "same_text_as_best": same,
        "answers": [a.to_json() for a in answers],
    }
