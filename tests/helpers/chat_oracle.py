"""llama.cpp's recorded chat renderings and parses (tests/fixtures/chat_oracle), for tests.

tools/record_chat_oracle.py writes them with chat-oracle (llama.cpp's common/chat.h);
the layout is described there and in docs/architecture.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from specchat.engine.templates.chat_message import ChatMessage
from specchat.serve.parsing import parse_chat_call

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures" / "chat_oracle"
RECORDER = REPO / "tools" / "record_chat_oracle.py"


def load_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def inputs() -> dict[str, Any]:
    """conversations.json: the chats, the parse cases, bos/eos and the date."""
    data: dict[str, Any] = load_json(FIXTURES / "conversations.json")
    return data


def now() -> datetime:
    """The moment the fixtures were rendered at, as the local time a template reads (the
    oracle runs in UTC)."""
    moment = datetime.fromtimestamp(inputs()["now"], tz=timezone.utc)
    return moment.replace(tzinfo=None)


@dataclass(frozen=True)
class RenderCase:
    """One chat rendered by llama.cpp through one template.

    Attributes:
        template: the template's file stem.
        source: its Jinja source.
        conversation: the chat's name in conversations.json.
        enable_thinking: the value the template was given.
        prompt: llama.cpp's prompt, or None where it refused.
        error: llama.cpp's refusal, or None.
    """

    template: str
    source: str
    conversation: str
    enable_thinking: bool
    prompt: str | None
    error: str | None

    @property
    def key(self) -> str:
        thinking = "thinking" if self.enable_thinking else "no-thinking"
        return f"{self.template}/{self.conversation}/{thinking}"


def render_cases() -> Iterator[RenderCase]:
    """Every recorded rendering, template by template."""
    for path in sorted((FIXTURES / "render").glob("*.json")):
        data = load_json(path)
        for case in data["cases"]:
            yield RenderCase(
                template=path.stem,
                source=data["source"],
                conversation=case["conversation"],
                enable_thinking=case["enable_thinking"],
                prompt=case.get("prompt"),
                error=case.get("error"),
            )


def conversation(name: str) -> dict[str, Any]:
    """A chat of conversations.json by name."""
    found: dict[str, Any] = next(c for c in inputs()["conversations"] if c["name"] == name)
    return found


def as_served(chat: dict[str, Any]) -> tuple[tuple[ChatMessage, ...], list[dict[str, Any]] | None]:
    """A chat as `specchat serve` reads it from a request: its messages and its tools."""
    body: dict[str, Any] = {"model": "oracle", "messages": chat["messages"]}
    if chat["tools"] is not None:
        body["tools"] = chat["tools"]
    call = parse_chat_call(body, modes=("auto",), n_ctx=1 << 20)
    tools = None if call.tools is None else [dict(t) for t in call.tools.tools]
    return call.messages, tools
