"""The bench through `specchat serve`: each prompt answered by the engine called directly and
through the HTTP API (same engine, same settings), timed from outside, side by side.

Both ways start alike, as the main bench's runs do: the prompt already read (neither pays
the prompt's reading for the other) and nothing of an earlier answer in the suffix index's
chat (neither copies the other's answer). Each way's prompt tokens evaluated and rounds are
recorded to show it."""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specchat.bench.live.runner import prime
from specchat.bench.prompts import BenchPrompt
from specchat.engine.llamacpp.compute_threads import workers_released
from specchat.engine.session import ChatEngine
from specchat.engine.templates.chat_template import ChatMessage
from specchat.engine.types import Controls, GenerationRequest, SamplingParams
from specchat.host.jobs import evaluated
from specchat.serve.server import ApiServer

#: The server's overhead goal: tokens per second through the API against the engine direct.
OVERHEAD_GOAL = 0.98


class ApiRefused(RuntimeError):
    """The API answered a bench request with an error (its message is OpenAI's)."""

    @classmethod
    def of(cls, status: int, body: bytes) -> ApiRefused:
        try:
            message = str(json.loads(body)["error"]["message"])
        except (ValueError, KeyError, TypeError):
            message = body[:200].decode("utf-8", "replace")
        return cls(f"the API answered {status}: {message}")


@dataclass(frozen=True)
class ViaApi:
    """One prompt's answers, direct and through the API.

    Attributes:
        prompt: the prompt's id.
        tokens: answer tokens (the same both ways at temperature 0).
        direct_s: wall time of the direct answer, prompt reading included.
        api_s: wall time of the API request, from sending it to its last byte.
        same_text: whether both answers are the same text.
        kept_prediction: the API's accepted_prediction_tokens.
        direct_work: (prompt tokens evaluated, rounds) of the direct answer.
        api_work: the same through the API (its timings.prompt_n and specchat.rounds).
    """

    prompt: str
    tokens: int
    direct_s: float
    api_s: float
    same_text: bool
    kept_prediction: int
    direct_work: tuple[int, int] = (0, 0)
    api_work: tuple[int, int] = (0, 0)

    @property
    def ratio(self) -> float:
        """Tokens per second through the API ÷ direct (1.0: no overhead)."""
        return self.direct_s / self.api_s if self.api_s > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "prompt": self.prompt,
            "tokens": self.tokens,
            "direct_s": round(self.direct_s, 4),
            "api_s": round(self.api_s, 4),
            "api_vs_direct": round(self.ratio, 4),
            "same_text": self.same_text,
            "accepted_prediction_tokens": self.kept_prediction,
            "prompt_evaluated": {"direct": self.direct_work[0], "api": self.api_work[0]},
            "rounds": {"direct": self.direct_work[1], "api": self.api_work[1]},
        }


def stream_completion(
    host: str, port: int, body: Mapping[str, Any], on_event: Callable[[dict[str, Any]], None]
) -> float:
    """POST `body` as a streamed chat completion and hand each of its events to `on_event`
    as it arrives; returns when it was sent (time.perf_counter), to time it from outside as
    a client would. Raises ApiRefused on any status but 200."""
    connection = http.client.HTTPConnection(host, port, timeout=3600)
    try:
        began = time.perf_counter()
        headers = {"Content-Type": "application/json"}
        connection.request("POST", "/v1/chat/completions", json.dumps(body).encode(), headers)
        reply = connection.getresponse()
        if reply.status != 200:
            raise ApiRefused.of(reply.status, reply.read())
        for line in reply:
            data = line.strip()
            if data.startswith(b"data: ") and data != b"data: [DONE]":
                on_event(json.loads(data[len(b"data: ") :]))
    finally:
        connection.close()
    return began


def _tokens(engine: ChatEngine, prompt: BenchPrompt) -> tuple[int, ...]:
    messages = [ChatMessage(m["role"], m["content"]) for m in prompt.messages()]
    return engine.prepare(messages, max_tokens=1).tokens


def _level(engine: ChatEngine, tokens: Sequence[int], server: ApiServer) -> None:
    """Start the next answer as the other way's started: the prompt read, the suffix
    index's chat empty, no earlier API chat filed in it (unmeasured). The prompt is read on
    this thread and the server's may answer next: this one's workers go."""
    with workers_released():
        prime(engine, tokens)
    engine.said.forget_chat()
    server.executor.runner.forget_last_chat()


def _direct(
    engine: ChatEngine, prompt: BenchPrompt, *, mode: str, max_tokens: int
) -> tuple[str, int, float, tuple[int, int]]:
    began = time.perf_counter()
    messages = [ChatMessage(m["role"], m["content"]) for m in prompt.messages()]
    prepared = engine.prepare(messages, max_tokens=1)
    prediction: tuple[int, ...] = ()
    if prompt.prediction:
        prediction = tuple(engine.target.tokenize(prompt.prediction, parse_special=False))
    room = engine.target.n_ctx - len(prepared.tokens)
    request = GenerationRequest(
        prepared.tokens,
        min(max_tokens, room),
        Controls(mode, 4, SamplingParams(temperature=0.0)),
        prediction=prediction,
    )
    text, tokens = [], 0
    work = (0, 0)
    for result in engine.generate(request):
        text.append(result.text)
        tokens += len(result.events)
        # Counted as the API counts them (timings.prompt_n).
        work = (evaluated(len(prepared.tokens), result.stats), result.stats.rounds)
    return "".join(text), tokens, time.perf_counter() - began, work


def _api(
    host: str, port: int, prompt: BenchPrompt, *, mode: str, max_tokens: int
) -> tuple[dict[str, Any], float]:
    body: dict[str, Any] = {
        "model": "bench",
        "messages": prompt.messages(),
        "temperature": 0,
        "max_tokens": max_tokens,
        "speculative": {"mode": mode, "k": 4},
    }
    if prompt.prediction:
        body["prediction"] = {"type": "content", "content": prompt.prediction}
    connection = http.client.HTTPConnection(host, port, timeout=3600)
    try:
        began = time.perf_counter()
        headers = {"Content-Type": "application/json"}
        connection.request("POST", "/v1/chat/completions", json.dumps(body).encode(), headers)
        reply = connection.getresponse()
        data = reply.read()
        elapsed = time.perf_counter() - began
    finally:
        connection.close()
    if reply.status != 200:
        raise ApiRefused.of(reply.status, data)
    return json.loads(data), elapsed


@contextmanager
def serving(engine: ChatEngine) -> Iterator[tuple[str, int]]:
    """`specchat serve` over `engine` on 127.0.0.1 at a free port while the block runs:
    (host, port). `--via-api --peers` asks it beside llama-server (bench/peers)."""
    from specchat.serve.guard import ServeOptions

    server = ApiServer.for_engine(
        engine, ServeOptions(port=0), calibrate_plain=False, profile=False
    )
    address = server.start()
    try:
        yield address.host, address.port
    finally:
        server.stop()


def compare_via_api(
    engine: ChatEngine,
    prompts: Sequence[BenchPrompt],
    *,
    mode: str = "auto",
    max_tokens: int = 128,
    repeat: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> list[ViaApi]:
    """Each prompt (`repeat` times), direct then through an API server on 127.0.0.1 over the
    same engine; the engine stays open for the caller."""
    from specchat.serve.guard import ServeOptions

    server = ApiServer.for_engine(
        engine, ServeOptions(port=0), calibrate_plain=False, profile=False
    )
    address = server.start()
    results: list[ViaApi] = []
    total = len(prompts) * repeat
    try:
        for round_index in range(repeat):
            for prompt in prompts:
                tokens_in = _tokens(engine, prompt)
                # Alternate which goes first, so a slow spell of the machine is shared.
                first_direct = (round_index + len(results)) % 2 == 0
                if first_direct:
                    _level(engine, tokens_in, server)
                    text, tokens, direct_s, direct_work = _direct(
                        engine, prompt, mode=mode, max_tokens=max_tokens
                    )
                _level(engine, tokens_in, server)
                reply, api_s = _api(
                    address.host, address.port, prompt, mode=mode, max_tokens=max_tokens
                )
                if not first_direct:
                    _level(engine, tokens_in, server)
                    text, tokens, direct_s, direct_work = _direct(
                        engine, prompt, mode=mode, max_tokens=max_tokens
                    )
                details = reply["usage"]["completion_tokens_details"]
                results.append(
                    ViaApi(
                        prompt.id,
                        tokens,
                        direct_s,
                        api_s,
                        reply["choices"][0]["message"]["content"] == text,
                        int(details["accepted_prediction_tokens"]),
                        direct_work,
                        (int(reply["timings"]["prompt_n"]), int(reply["specchat"]["rounds"])),
                    )
                )
                if progress is not None:
                    progress(len(results), total)
    finally:
        server.stop()
    return results


def write_via_api(results: Sequence[ViaApi], out: Path) -> dict[str, Any]:
    """`via-api.json` in `out`: every prompt's figures and the geometric mean ratio."""
    import math

    ratios = [r.ratio for r in results if r.ratio > 0]
    mean = math.exp(sum(math.log(r) for r in ratios) / len(ratios)) if ratios else 0.0
    report = {
        "goal": f"tokens/s through the API >= {OVERHEAD_GOAL} x the engine called directly",
        "api_vs_direct_geomean": round(mean, 4),
        "result": "PASS" if mean >= OVERHEAD_GOAL else "FAIL",
        "all_same_text": all(r.same_text for r in results),
        "prompts": [r.to_json() for r in results],
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "via-api.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    return report
