"""Real agent frameworks (the OpenAI Agents SDK, pydantic-ai) drive `specchat serve` on the
default pair: their tools are called with the right arguments, the results reach the model
and the final answer arrives, whole and streamed; what they send is accepted as sent."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import agents
import openai
import pytest

from tests.helpers.api_server import running_server, server_log, tracebacks

pytestmark = [pytest.mark.real_model, pytest.mark.slow]
#: pydantic-ai is imported where used: it needs Python 3.11, SpecChat 3.10.
needs_pydantic_ai = pytest.mark.skipif(
    sys.version_info < (3, 11), reason="pydantic-ai needs Python 3.11"
)

#: An agent's usual instructions: without "once you have its result", the 1.5B model calls
#: the tool again after its result instead of answering.
INSTRUCTIONS = (
    "You are a helpful assistant. Call a tool when you need it; once you have its result, "
    "answer the user in one sentence."
)
#: Each question, the call it should make, what the tool answers and what the answer says.
WEATHER = ("What is the weather in Paris?", ("get_weather", "Paris"), "21 degrees")
CONVERSION = ("Convert 25 degrees Celsius to Fahrenheit.", ("convert_temperature", 25), "77")
#: Enough for a call or a sentence; a run's turns bounded, as the frameworks allow.
MAX_TOKENS = 64
MAX_TURNS = 3


@dataclass
class Toolbox:
    """Two plain functions an agent may call, recording their calls.

    Attributes:
        calls: (function, argument) of each call, in order.
        results: what each call returned, in order.
    """

    calls: list[tuple[str, object]] = field(default_factory=list)
    results: list[str] = field(default_factory=list)

    def functions(self) -> list[Callable[..., str]]:
        # Plain functions with docstrings: both frameworks build a tool's schema and its
        # argument's description from them.
        def get_weather(city: str) -> str:
            """Get the current weather in a city.

            Args:
                city: The city's name.
            """
            return self._answer("get_weather", city, f"{city}: 21 degrees Celsius, sunny.")

        def convert_temperature(celsius: float) -> str:
            """Convert a temperature from degrees Celsius to degrees Fahrenheit.

            Args:
                celsius: Degrees Celsius.
            """
            return self._answer(
                "convert_temperature", celsius, f"{celsius * 9 / 5 + 32:g} degrees Fahrenheit"
            )

        return [get_weather, convert_temperature]

    def _answer(self, name: str, argument: object, result: str) -> str:
        self.calls.append((name, argument))
        self.results.append(result)
        return result


@dataclass
class Exchange:
    """One request a framework sent and the status of its reply.

    Attributes:
        body: the request's JSON body.
        status: the reply's HTTP status.
    """

    body: dict[str, Any]
    status: int = 0


class Wire:
    """What a framework sends, read off its own HTTP client: every request's body and its
    reply's status (the framework's client, so the bytes are the framework's).

    Attributes:
        exchanges: each request, in order.
    """

    def __init__(self) -> None:
        self.exchanges: list[Exchange] = []

    def client(self) -> openai.DefaultAsyncHttpxClient:
        return openai.DefaultAsyncHttpxClient(
            event_hooks={"request": [self._on_request], "response": [self._on_response]},
            timeout=600,
        )

    async def _on_request(self, request: Any) -> None:
        self.exchanges.append(Exchange(json.loads(await request.aread())))

    async def _on_response(self, response: Any) -> None:
        self.exchanges[-1].status = response.status_code


@dataclass(frozen=True)
class Run:
    """An agent's run through the server.

    Attributes:
        answer: the final answer's text.
        toolbox: the tools' calls and results.
        wire: what the framework sent.
    """

    answer: str
    toolbox: Toolbox
    wire: Wire


@pytest.fixture(scope="module")
def base_url(real_pair: tuple[Path, Path]) -> Iterator[str]:
    with running_server(*real_pair, n_ctx=2048) as server:
        assert server.address is not None
        yield server.address.base_url


@pytest.fixture(autouse=True)
def no_server_errors(base_url: str) -> Iterator[None]:
    """Whatever the frameworks send, the server logs no error (entered once it started)."""
    with server_log() as records:
        yield
    assert not tracebacks(records)


def run_openai_agents(base_url: str, question: str, *, stream: bool, **settings: Any) -> Run:
    toolbox, wire = Toolbox(), Wire()

    async def run() -> str:
        http = wire.client()
        async with openai.AsyncOpenAI(
            base_url=base_url, api_key="none", max_retries=0, http_client=http
        ) as client:
            agent = agents.Agent(
                name="assistant",
                instructions=INSTRUCTIONS,
                model=agents.OpenAIChatCompletionsModel(model="default", openai_client=client),
                tools=[agents.function_tool(f) for f in toolbox.functions()],
                model_settings=agents.ModelSettings(
                    temperature=0, max_tokens=MAX_TOKENS, **settings
                ),
            )
            # No tracing: its exporter would send each run to OpenAI.
            config = agents.RunConfig(tracing_disabled=True)
            if not stream:
                done = await agents.Runner.run(
                    agent, question, max_turns=MAX_TURNS, run_config=config
                )
                return str(done.final_output)
            streamed = agents.Runner.run_streamed(
                agent, question, max_turns=MAX_TURNS, run_config=config
            )
            async for _ in streamed.stream_events():
                pass
            return str(streamed.final_output)

    return Run(asyncio.run(run()), toolbox, wire)


def run_pydantic_ai(base_url: str, question: str, *, stream: bool, **settings: Any) -> Run:
    import pydantic_ai
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    toolbox, wire = Toolbox(), Wire()

    async def run() -> str:
        provider = OpenAIProvider(base_url=base_url, api_key="none", http_client=wire.client())
        agent = pydantic_ai.Agent(
            OpenAIChatModel("default", provider=provider),
            instructions=INSTRUCTIONS,
            tools=toolbox.functions(),
            model_settings=pydantic_ai.ModelSettings(
                temperature=0, max_tokens=MAX_TOKENS, **settings
            ),
        )
        limits = pydantic_ai.UsageLimits(request_limit=MAX_TURNS)
        if not stream:
            return (await agent.run(question, usage_limits=limits)).output
        async with agent.run_stream(question, usage_limits=limits) as streamed:
            return await streamed.get_output()

    return Run(asyncio.run(run()), toolbox, wire)


def check_run(run: Run, asked: tuple[str, tuple[str, object], str]) -> list[dict[str, Any]]:
    """The call made with the right argument, its result in the last request, the answer
    from it; every request accepted. Returns the requests' bodies."""
    _, call, said = asked
    assert run.toolbox.calls and set(run.toolbox.calls) == {call}
    sent = [exchange.body for exchange in run.wire.exchanges]
    assert [exchange.status for exchange in run.wire.exchanges] == [200] * len(sent)
    assert len(sent) >= 2
    # The last request carries the call and its result, as a tool message answering it.
    *_, called, result = sent[-1]["messages"]
    (made,) = called["tool_calls"]
    assert made["function"]["name"] == call[0]
    assert result == {
        "role": "tool",
        "tool_call_id": made["id"],
        "content": run.toolbox.results[-1],
    }
    assert said in run.answer
    return sent


def test_openai_agents_runs_a_tool_whole(base_url: str) -> None:
    """The SDK's defaults: every tool `strict`, no tool_choice, no parallel_tool_calls."""
    run = run_openai_agents(base_url, WEATHER[0], stream=False)
    for body in check_run(run, WEATHER):
        assert body.get("stream") in (None, False)
        assert [tool["function"]["strict"] for tool in body["tools"]] == [True, True]
        assert "tool_choice" not in body and "parallel_tool_calls" not in body


def test_openai_agents_runs_a_tool_streamed(base_url: str) -> None:
    """A call required on the first turn (the SDK drops tool_choice once a tool ran), one
    call a turn (parallel_tool_calls false, as Continue sends it)."""
    asked = {"tool_choice": "required", "parallel_tool_calls": False}
    run = run_openai_agents(base_url, CONVERSION[0], stream=True, **asked)
    first, *later = check_run(run, CONVERSION)
    for body in (first, *later):
        assert body["stream"] is True
        assert [tool["function"]["strict"] for tool in body["tools"]] == [True, True]
        assert body["parallel_tool_calls"] is False
    assert first["tool_choice"] == "required"
    assert all("tool_choice" not in body for body in later)


@needs_pydantic_ai
def test_pydantic_ai_runs_a_tool_whole(base_url: str) -> None:
    """pydantic-ai's defaults: each tool `strict` where its schema allows (its OpenAI
    profile), tool_choice auto, no parallel_tool_calls, max_completion_tokens."""
    run = run_pydantic_ai(base_url, WEATHER[0], stream=False)
    for body in check_run(run, WEATHER):
        assert body["stream"] is False
        assert [tool["function"]["strict"] for tool in body["tools"]] == [True, True]
        assert body["tool_choice"] == "auto" and "parallel_tool_calls" not in body
        assert body["max_completion_tokens"] == MAX_TOKENS


@needs_pydantic_ai
def test_pydantic_ai_runs_a_tool_streamed(base_url: str) -> None:
    """A tool_choice naming one tool (sent as OpenAI's allowed_tools) and one call a turn."""
    import pydantic_ai

    only = pydantic_ai.ToolOrOutput(function_tools=["convert_temperature"])
    run = run_pydantic_ai(
        base_url, CONVERSION[0], stream=True, tool_choice=only, parallel_tool_calls=False
    )
    allowed = {
        "type": "allowed_tools",
        "allowed_tools": {
            "mode": "auto",
            "tools": [{"type": "function", "function": {"name": "convert_temperature"}}],
        },
    }
    for body in check_run(run, CONVERSION):
        assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
        assert [tool["function"]["strict"] for tool in body["tools"]] == [True, True]
        assert body["tool_choice"] == allowed and body["parallel_tool_calls"] is False
