"""Measure a long thinking chat on a hybrid target (issue #48, item 1): per step, the prompt
tokens the target really read (a follower of its cache counts every row, re-reads inside a
rollback included), the first token's time and the memory the kept states take, through
the API (an in-process `specchat serve` with its prefix cache, two clients taking turns) and
the window's path (kept states on disk, read in chunks, without Qt).

The scenario: a ten-turn chat whose every answer thinks, with the real Qwen3.5 template
(dropping earlier thinking), then an edit of turn 4, a regenerate of the last turn, a
switch to another chat and back, and a restart (the pair loaded again, the chat restored
from disk).

Usage:
    python tools/measure_long_chat.py [--model FILE] [--turns 10] [--max-tokens 48]

Without --model it writes the real-shape synthetic Qwen3.5-0.8B with the real Qwen3.5
tokenizer and template (tools/write_proportional_models.py's layout, quantised to Q4_K_M;
random weights) into ~/.cache/specchat/synthetic/ once, which takes minutes; the llama.cpp
source tree comes from tools/fetch_llama_source.sh (or the vendored one in
~/.cache/specchat/sdist).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

DEFAULT_OUT = Path.home() / ".cache" / "specchat" / "synthetic"
VENDORED = Path.home() / ".cache/specchat/sdist/llama_cpp_python-0.3.36/vendor/llama.cpp"
QUESTIONS = [
    "Plan a three-day trip to Lisbon.",
    "What should I pack?",
    "Which museums are worth it?",
    "How do I get from the airport?",
    "Suggest a budget.",
    "What about day trips?",
    "Where should I eat?",
    "Any phrases I should learn?",
    "Is it safe at night?",
    "Summarise the plan.",
]


class ReadLog:
    """Rows the target read since the last `take` (a follower of its cache)."""

    def __init__(self) -> None:
        self.rows = 0
        self.first = -1

    def decoded(self, tokens: Sequence[int], start: int) -> None:
        self.rows += len(tokens)
        self.first = start if self.first < 0 else min(self.first, start)

    def dropped(self, n_keep: int) -> None:
        pass

    def state(self) -> None:
        return None

    def adopt(self, state: object) -> bool:
        return True

    def close(self) -> None:
        pass

    def take(self) -> tuple[int, int]:
        rows, first = self.rows, self.first
        self.rows, self.first = 0, -1
        return rows, first


@dataclass
class Step:
    path: str
    step: str
    prompt: int
    read: int
    first_read_at: int
    first_token_s: float
    kept_mib: float

    def line(self) -> str:
        return (
            f"{self.path:6} {self.step:22} prompt {self.prompt:6} read {self.read:6} "
            f"from {self.first_read_at:6}  first token {self.first_token_s * 1000:8.0f} ms  "
            f"kept {self.kept_mib:7.1f} MiB"
        )


def synthetic_model(out: Path, threads: int) -> Path:
    """The real-shape Qwen3.5-0.8B with its MTP layer, the real tokenizer and template."""
    import write_proportional_models as wpm

    from specchat.tinyarch import write_tiny_qwen35
    from specchat.tinyarch.real_vocab import QWEN35_CHAT, RealChat

    source = VENDORED if VENDORED.exists() else Path.home() / ".cache/specchat/llama-source"
    chat = RealChat.load(source, QWEN35_CHAT)
    spec = wpm.Spec(
        "qwen35-0.8b-mtp-chat",
        lambda path, maker: write_tiny_qwen35(
            path,
            mtp=True,
            shape=wpm.QWEN35_0_8B,
            name="synthetic-qwen3.5-0.8b",
            chat=chat,
            maker=maker,
        ),
    )
    target = out / spec.file_name
    return target if target.exists() else wpm.write_file(spec, out, threads=threads)


def messages_tokens(engine: Any, messages: list[dict[str, Any]]) -> tuple[int, ...]:
    """The prompt a chat makes (for its length)."""
    from specchat.engine.templates.chat_message import ChatMessage

    chat = [ChatMessage(m["role"], m["content"]) for m in messages]
    return tuple(engine.prepare(chat, max_tokens=1).tokens)


def ask_api(
    api: Api,
    prefixes: Any,
    args: argparse.Namespace,
    steps: list[Step],
    name: str,
    messages: list[dict[str, Any]],
) -> dict[str, Any]:
    """One request, streamed: its step measured and printed; the assistant message back."""
    client, engine, log = api.client, api.engine, api.log
    began = time.perf_counter()
    first = None
    text, reasoning = [], []
    stream = client.chat.completions.create(
        model="m",
        messages=messages,
        temperature=0,
        max_tokens=args.max_tokens,
        stream=True,
        extra_body={"speculative": {"mode": args.mode}},
    )
    for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        extra = delta.model_extra or {}
        piece = (delta.content or "") + (extra.get("reasoning_content") or "")
        if piece and first is None:
            first = time.perf_counter() - began
            # What was read before the first token (its own pass is not the prompt).
            read, at = log.take()
        text.append(delta.content or "")
        reasoning.append(extra.get("reasoning_content") or "")
    if first is None:
        read, at = log.take()
    log.take()
    prompt = len(messages_tokens(engine, messages))
    steps.append(Step("api", name, prompt, read, at, first or 0.0, prefixes.size_bytes / 2**20))
    print(steps[-1].line(), flush=True)
    return {"role": "assistant", "content": "".join(text)}


@dataclass
class Api:
    """One server's client, its engine and the log of what its target reads."""

    client: Any
    engine: Any
    log: ReadLog


def api_path(model: Path, args: argparse.Namespace, kept: Path) -> list[Step]:
    """Two clients taking turns through the API, then an edit, a regenerate, a restart (the
    prefix cache's chats kept on disk in `kept`, as where API chats are kept)."""
    import openai

    from specchat.engine.llamacpp.kv_store import KVStore
    from specchat.engine.llamacpp.prefix_cache import PrefixCache
    from specchat.engine.session import ChatEngine
    from specchat.serve.guard import ServeOptions
    from specchat.serve.server import ApiServer

    steps: list[Step] = []
    chats: dict[str, list[dict[str, Any]]] = {"A": [], "B": []}
    for restart in (False, True):
        # A restarted server starts with an empty prefix cache in memory; the chats' caches
        # written after their answers come back from disk.
        prefixes = PrefixCache(store=KVStore(kept))
        engine = ChatEngine.load(model, n_ctx=args.n_ctx, n_threads=args.threads)
        log = ReadLog()
        engine.target.follow(log)
        server = ApiServer.for_engine(
            engine, ServeOptions(port=0), calibrate_plain=False, profile=False, prefixes=prefixes
        )
        server.start()
        address = server.address
        assert address is not None
        client = openai.OpenAI(base_url=f"http://{address.host}:{address.port}/v1", api_key="x")

        api = Api(client, engine, log)
        if restart:
            chats["A"].append({"role": "user", "content": "And after the restart?"})
            ask_api(api, prefixes, args, steps, "A after a restart", chats["A"])
        for turn in range(0 if restart else args.turns):
            for who in ("A", "B"):  # two clients taking turns
                question = QUESTIONS[turn % len(QUESTIONS)] + ("" if who == "A" else " (B)")
                chats[who].append({"role": "user", "content": question})
                reply = ask_api(api, prefixes, args, steps, f"{who} turn {turn + 1}", chats[who])
                chats[who].append(reply)
        if not restart:
            edited = [*chats["A"][:6], {"role": "user", "content": "Rather Porto, then."}]
            ask_api(api, prefixes, args, steps, "A edit turn 4", edited)
            ask_api(api, prefixes, args, steps, "A regenerate", chats["A"][:-1])
        server.stop(timeout_s=20)
        engine.close()
    return steps


def window_path(model: Path, args: argparse.Namespace, kept: Path) -> list[Step]:
    """The window's way: a conversation's state kept on disk after each answer, restored
    before the next prompt is read in chunks; a switch to another chat and back; a restart."""
    from specchat.engine.llamacpp.kv_store import KVStore
    from specchat.engine.llamacpp.prompt_reading import PromptRate, read_prompt
    from specchat.engine.session import ChatEngine
    from specchat.engine.templates.chat_message import ChatMessage
    from specchat.engine.types import Controls, GenerationRequest

    steps: list[Step] = []
    store = KVStore(kept)
    rate = PromptRate()
    chats: dict[str, list[ChatMessage]] = {"one": [], "two": []}

    def answer(engine: ChatEngine, log: ReadLog, chat: str, step: str) -> None:
        messages = chats[chat]
        prepared = engine.prepare(messages, max_tokens=args.max_tokens)
        prompt = list(prepared.tokens)
        began = time.perf_counter()
        store.restore(engine.target, chat, prompt[:-1])
        for _ in read_prompt(engine.target, prompt[:-1], rate=rate):
            pass
        first = None
        tokens: list[str] = []
        request = GenerationRequest(
            tuple(prompt), args.max_tokens, Controls(args.mode, 3), conversation=chat
        )
        read, at = log.take()  # the prompt: restored, then read
        for result in engine.generate(request):
            if first is None:
                first = time.perf_counter() - began
            tokens.extend(e.text for e in result.events)
        log.take()
        store.save(engine.target, chat)
        steps.append(
            Step("window", step, len(prompt), read, at, first or 0.0, store.total_bytes() / 2**20)
        )
        print(steps[-1].line(), flush=True)
        messages.append(ChatMessage("assistant", "".join(tokens)))

    for restart in (False, True):
        engine = ChatEngine.load(model, n_ctx=args.n_ctx, n_threads=args.threads)
        log = ReadLog()
        engine.target.follow(log)
        if restart:
            chats["one"].append(ChatMessage("user", "And after the restart?"))
            answer(engine, log, "one", "restart, chat one")
        else:
            for turn in range(args.turns):
                chats["one"].append(ChatMessage("user", QUESTIONS[turn % len(QUESTIONS)]))
                answer(engine, log, "one", f"turn {turn + 1}")
            chats["one"][6:] = [ChatMessage("user", "Rather Porto, then.")]
            answer(engine, log, "one", "edit turn 4")
            chats["one"].pop()
            answer(engine, log, "one", "regenerate")
            chats["two"].append(ChatMessage("user", "Something else: a poem."))
            answer(engine, log, "two", "switch to chat two")
            chats["one"].append(ChatMessage("user", "Back to Lisbon."))
            answer(engine, log, "one", "back to chat one")
        engine.close()
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="a hybrid target (default: the synthetic)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--n-ctx", type=int, default=8192)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--mode", default="plain")
    parser.add_argument("--paths", nargs="+", default=["api", "window"])
    parser.add_argument("--json", type=Path, help="write the steps here too")
    args = parser.parse_args()
    model = args.model or synthetic_model(args.out, args.threads)
    steps: list[Step] = []
    import tempfile

    if "api" in args.paths:
        with tempfile.TemporaryDirectory() as kept:
            steps += api_path(model, args, Path(kept))
    if "window" in args.paths:
        with tempfile.TemporaryDirectory() as kept:
            steps += window_path(model, args, Path(kept))
    if args.json:
        args.json.write_text(json.dumps([s.__dict__ for s in steps], indent=1))


if __name__ == "__main__":
    main()
