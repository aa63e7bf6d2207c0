"""The scripted agent: one task through `specchat serve`, turn by turn, as an agent client
drives it: each request carries the whole history and the tools, the answer's calls are run
by the bench's toolbox and their results sent back, until the model answers in text."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specchat.bench.agent.agent_tasks import FINISH, SYSTEM, TOOLS, AgentTask, Toolbox
from specchat.bench.api.via_api import ApiRefused, stream_completion


@dataclass(frozen=True)
class Call:
    """A tool call as the agent received it.

    Attributes:
        name: the function.
        arguments: its arguments' text.
    """

    name: str
    arguments: str


@dataclass(frozen=True)
class AgentTurn:
    """One request of the agent's loop, as its client saw it.

    Attributes:
        prompt_tokens: the rendered prompt's length (usage.prompt_tokens).
        evaluated: prompt tokens evaluated (timings.prompt_n); the rest came from the cache.
        prompt_ms: the server's prompt evaluation time.
        first_token_s: from sending the request to its first streamed content or call.
        tokens: answer tokens.
        decode_ms: the answer's decoding time (timings.predicted_ms).
        kept_by_source: kept draft tokens by where they came from.
        finish_reason: how the answer ended.
        content: the answer's text ("" for none).
        calls: the tool calls it made.
        invalid_arguments: calls whose arguments were no JSON object (specchat's flag).
        call_tokens: answer tokens inside tool calls (specchat's count).
        call_kept: of those, draft tokens the target kept.
    """

    prompt_tokens: int
    evaluated: int
    prompt_ms: float
    first_token_s: float
    tokens: int
    decode_ms: float
    kept_by_source: dict[str, int]
    finish_reason: str
    content: str
    calls: tuple[Call, ...]
    invalid_arguments: int = 0
    call_tokens: int = 0
    call_kept: int = 0

    @property
    def decode_tokens_per_s(self) -> float:
        return self.tokens * 1000.0 / self.decode_ms if self.decode_ms > 0 else 0.0

    @property
    def answer(self) -> tuple[str, tuple[Call, ...]]:
        """What the model said (two runs at T = 0 say the same)."""
        return self.content, self.calls

    def to_json(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "prompt_tokens_evaluated": self.evaluated,
            "cached_tokens": self.prompt_tokens - self.evaluated,
            "prompt_ms": round(self.prompt_ms, 1),
            "first_token_s": round(self.first_token_s, 4),
            "completion_tokens": self.tokens,
            "decode_ms": round(self.decode_ms, 1),
            "decode_tokens_per_s": round(self.decode_tokens_per_s, 3),
            "kept_by_source": self.kept_by_source,
            "finish_reason": self.finish_reason,
            "content": self.content,
            "calls": [{"name": c.name, "arguments": c.arguments} for c in self.calls],
            "invalid_arguments": self.invalid_arguments,
            "call_tokens": self.call_tokens,
            "call_kept": self.call_kept,
        }


@dataclass(frozen=True)
class AgentRun:
    """One task run by the agent in one mode.

    Attributes:
        task: the task's id.
        mode: the drafting mode asked for.
        turns: every request, in order.
        passed: whether the task's check passed once the agent stopped.
    """

    task: str
    mode: str
    turns: tuple[AgentTurn, ...]
    passed: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "mode": self.mode,
            "check_passed": self.passed,
            "turns": [t.to_json() for t in self.turns],
        }


@dataclass
class _Stream:
    """What one streamed answer said, gathered from its chunks."""

    first: float | None = None
    content: list[str] = field(default_factory=list)
    calls: dict[int, list[str]] = field(default_factory=dict)  # index: [name, arguments]
    finish: str = ""
    usage: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, Any] = field(default_factory=dict)
    specchat: dict[str, Any] = field(default_factory=dict)

    def take(self, event: dict[str, Any]) -> None:
        for choice in event.get("choices", []):
            delta = choice.get("delta", {})
            if delta.get("content") or delta.get("tool_calls"):
                self.first = self.first if self.first is not None else time.perf_counter()
            if delta.get("content"):
                self.content.append(delta["content"])
            for part in delta.get("tool_calls") or []:
                call = self.calls.setdefault(int(part["index"]), ["", ""])
                function = part.get("function", {})
                call[0] += function.get("name") or ""
                call[1] += function.get("arguments") or ""
            self.finish = choice.get("finish_reason") or self.finish
        self.timings = event.get("timings", self.timings)
        self.specchat = event.get("specchat", self.specchat)
        self.usage = event.get("usage") or self.usage


def request_turn(
    host: str,
    port: int,
    messages: list[dict[str, Any]],
    *,
    mode: str,
    max_tokens: int,
    tool_choice: str | dict[str, Any] = "required",
    template_variables: dict[str, Any] | None = None,
) -> AgentTurn:
    """One streamed request of the loop at T = 0, with the tools (and the template's
    variables, where given), timed from outside."""
    body = {
        "model": "bench",
        "messages": messages,
        "tools": list(TOOLS),
        "tool_choice": tool_choice,
        # One step at a time: a call made before the results of the one before it is a
        # guess (the 1.5B model writes a file before reading it).
        "parallel_tool_calls": False,
        "temperature": 0,
        "max_tokens": max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        "speculative": {"mode": mode},
    }
    if template_variables:
        body["chat_template_kwargs"] = template_variables
    stream = _Stream()
    began = stream_completion(host, port, body, stream.take)
    if not stream.usage or not stream.timings:
        raise ApiRefused("the stream ended without its usage and timings")
    calls = tuple(Call(name, arguments) for _, (name, arguments) in sorted(stream.calls.items()))
    return AgentTurn(
        prompt_tokens=int(stream.usage["prompt_tokens"]),
        evaluated=int(stream.timings["prompt_n"]),
        prompt_ms=float(stream.timings["prompt_ms"]),
        first_token_s=(stream.first or time.perf_counter()) - began,
        tokens=int(stream.usage["completion_tokens"]),
        decode_ms=float(stream.timings["predicted_ms"]),
        kept_by_source=dict(stream.specchat.get("kept_by_source", {})),
        finish_reason=stream.finish,
        content="".join(stream.content),
        calls=calls,
        invalid_arguments=len(stream.specchat.get("invalid_tool_arguments", [])),
        call_tokens=int(stream.specchat.get("tool_call_tokens", {}).get("written", 0)),
        call_kept=int(stream.specchat.get("tool_call_tokens", {}).get("kept", 0)),
    )


def run_task(
    host: str,
    port: int,
    task: AgentTask,
    root: Path,
    *,
    mode: str,
    max_tokens: int,
    max_turns: int,
    tool_choice: str | dict[str, Any] = "required",
    template_variables: dict[str, Any] | None = None,
) -> AgentRun:
    """The agent's loop over `task`, its repository copied into `root` (fresh), until the
    model finishes (finish is refused while the check fails), answers in text, or has made
    `max_turns` requests. `tool_choice` as
    the API takes it: required by default, as agents that end on a finish tool send it;
    `template_variables`: the chat template's variables each request sends (agent_styles)."""
    toolbox = Toolbox(task, root)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": task.instruction},
    ]
    turns: list[AgentTurn] = []
    for number in range(max_turns):
        try:
            turn = request_turn(
                host,
                port,
                messages,
                mode=mode,
                max_tokens=max_tokens,
                tool_choice=tool_choice,
                template_variables=template_variables,
            )
        except ApiRefused as error:
            raise ApiRefused(f"{task.id} ({mode}), turn {number}: {error}") from None
        turns.append(turn)
        # The ids are the agent's own, numbered: two runs of a task send the same history.
        ids = [f"call_{number}_{index}" for index in range(len(turn.calls))]
        said: dict[str, Any] = {"role": "assistant", "content": turn.content or None}
        if turn.calls:
            said["tool_calls"] = [
                {
                    "id": ident,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for ident, call in zip(ids, turn.calls, strict=True)
            ]
        messages.append(said)
        finished = False
        for ident, call in zip(ids, turn.calls, strict=True):
            result = toolbox.call(call.name, call.arguments)
            finished = finished or (call.name == FINISH and result == "done")
            messages.append(
                {"role": "tool", "tool_call_id": ident, "name": call.name, "content": result}
            )
        if not turn.calls or finished:
            break
    return AgentRun(task.id, mode, tuple(turns), toolbox.check()[0])
