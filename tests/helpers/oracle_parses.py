"""llama.cpp's recorded parses (tests/fixtures/chat_oracle/parse) read back by SpecChat's
answer reader, case by case, whole and streamed, for the fixture tests."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specchat.host.answer_format.formats import format_of
from specchat.host.answer_format.reader import AnswerReader, AnswerReply
from tests.helpers.answer_pieces import gathered

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "chat_oracle"


@dataclass(frozen=True)
class Message:
    """A message as the two sides are compared: arguments as parsed JSON where they parse.

    Attributes:
        content: its text ("" for none).
        reasoning: its thinking ("" for none).
        calls: each call's name and arguments.
    """

    content: str
    reasoning: str
    calls: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class ParseCase:
    """One recorded model output and llama.cpp's reading of it.

    Attributes:
        template: the template's file stem.
        name: the parse case ("tool_call", "malformed_call", ...).
        enable_thinking: the value the template was given.
        source: the template's Jinja source.
        generation_prompt: the end of the prompt llama.cpp parses the output after.
        output: what the model wrote.
        tools: the functions offered.
        expected: llama.cpp's whole reading.
        stream_ends: where llama.cpp's streamed reading cut the output (characters).
        streamed: llama.cpp's streamed diffs gathered, or None where its stream broke (a
            malformed call: llama.cpp streams the call, then finds none and errs).
    """

    template: str
    name: str
    enable_thinking: bool
    source: str
    generation_prompt: str
    output: str
    tools: list[dict[str, Any]] | None
    expected: Message
    stream_ends: tuple[int, ...]
    streamed: Message | None

    @property
    def key(self) -> str:
        thinking = "thinking" if self.enable_thinking else "no-thinking"
        return f"{self.template}/{self.name}/{thinking}"


def _arguments(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def llama_message(message: dict[str, Any]) -> Message:
    calls = tuple(
        (
            call["function"]["name"] if "function" in call else call["name"],
            _arguments(call["function"]["arguments"] if "function" in call else call["arguments"]),
        )
        for call in message.get("tool_calls") or ()
    )
    return Message(message.get("content") or "", message.get("reasoning_content") or "", calls)


def our_message(reply: AnswerReply) -> Message:
    calls = tuple((call.name, _arguments(call.arguments)) for call in reply.calls)
    return Message(reply.content or "", reply.reasoning, calls)


def llama_streamed(steps: list[dict[str, Any]]) -> Message | None:
    """llama.cpp's streamed diffs gathered: texts joined, each call's name (a diff restates
    it with its id) and its arguments joined; None where a step erred."""
    if any("error" in step for step in steps):
        return None
    content, reasoning = [], []
    calls: dict[int, list[str]] = {}
    for diff in (diff for step in steps for diff in step.get("diffs", ())):
        content.append(diff.get("content_delta", ""))
        reasoning.append(diff.get("reasoning_content_delta", ""))
        if "tool_call_index" in diff:
            call = calls.setdefault(diff["tool_call_index"], ["", ""])
            delta = diff["tool_call_delta"]
            call[0] = delta.get("name") or call[0]
            call[1] += delta.get("arguments", "")
    gathered = tuple((name, _arguments(args)) for _, (name, args) in sorted(calls.items()))
    return Message("".join(content), "".join(reasoning), gathered)


def parse_cases() -> Iterator[ParseCase]:
    """Every recorded parse llama.cpp made without an error."""
    inputs = json.loads((FIXTURES / "conversations.json").read_text(encoding="utf-8"))
    tools_of = {case["name"]: case["tools"] for case in inputs["parse_cases"]}
    for path in sorted((FIXTURES / "parse").glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        render = json.loads((FIXTURES / "render" / path.name).read_text(encoding="utf-8"))
        for case in data["cases"]:
            if "message" not in case:
                continue
            name = case["case"]
            yield ParseCase(
                template=path.stem,
                name=name,
                enable_thinking=case["enable_thinking"],
                source=render["source"],
                generation_prompt=case.get("generation_prompt", ""),
                output=case["output"],
                tools=tools_of.get("tool_call" if name == "malformed_call" else name),
                expected=llama_message(case["message"]),
                stream_ends=tuple(step["end"] for step in case.get("stream", ())),
                streamed=llama_streamed(case.get("stream", [])),
            )


def read(case: ParseCase, *, pieces: list[str] | None = None) -> tuple[Message, Message]:
    """SpecChat's reading of the case's output: (whole, its streamed pieces gathered)."""
    answer_format = format_of(case.source)
    thinking = answer_format.thinking
    part = "" if thinking is None else thinking.prompt_part(case.generation_prompt)
    ids = (f"call_{n}" for n in itertools.count())
    reader = AnswerReader(
        answer_format,
        tools=case.tools,
        thinking_prompt=part,
        new_id=lambda: next(ids),
    )
    if pieces is None:
        ends = [0, *sorted(set(case.stream_ends)), len(case.output)]
        pieces = [case.output[a:b] for a, b in itertools.pairwise(ends)]
    out = [piece for text in pieces for piece in reader.feed(text)]
    out += reader.finish()
    reasoning, content, calls = gathered(out)
    streamed = Message(content, reasoning, tuple((n, _arguments(a)) for _, n, a in calls))
    return our_message(reader.reply()), streamed
