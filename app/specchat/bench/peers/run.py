"""Runs every peer on every prompt, `repeat` times, the peers side by side prompt by prompt."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specchat.bench.peers.configs import PeerConfig
from specchat.bench.peers.llama_server import LlamaServer, ServerSettings
from specchat.bench.peers.python_peer import answer, loaded
from specchat.bench.peers.server_process import PeerError, ServerProcess
from specchat.bench.peers.specchat_server import SpecChatServer
from specchat.bench.peers.turns import available_memory, fits, footprint, turn_order


@dataclass(frozen=True)
class PeerPrompt:
    """A bench prompt as the peers get it.

    Attributes:
        id: the prompt's id.
        category: its category.
        messages: the chat (OpenAI messages) llama-server is sent.
        tokens: SpecChat's prompt tokens for it (llama-cpp-python decodes from these).
    """

    id: str
    category: str
    messages: tuple[Mapping[str, str], ...]
    tokens: tuple[int, ...]


@dataclass(frozen=True)
class PeerRecord:
    """One peer's answer to one prompt.

    Attributes:
        peer: the peer's name.
        prompt: the prompt's id.
        category: its category.
        repeat: which pass over the set.
        tokens: tokens generated.
        tok_s: decode tokens per second (prompt reading and start-up excluded).
        drafted: tokens drafted (llama-server's draft_n; 0 where none or unknown).
        accepted: drafted tokens kept (draft_n_accepted).
        text: the answer.
        prompt_tokens: the prompt's length as the peer read it (llama-server renders the
            chat itself: a length unlike SpecChat's shows another rendering).
        error: why there is no answer ("" when there is one).
        token_ids: the answer's tokens where the peer gives them (llama-cpp-python, SpecChat):
            two such answers compare by tokens, not by a text a cut character may end.
    """

    peer: str
    prompt: str
    category: str
    repeat: int
    tokens: int = 0
    tok_s: float = 0.0
    drafted: int = 0
    accepted: int = 0
    text: str = ""
    prompt_tokens: int = 0
    error: str = ""
    token_ids: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "peer": self.peer,
            "prompt": self.prompt,
            "category": self.category,
            "repeat": self.repeat,
            "tokens": self.tokens,
            "tok_s": round(self.tok_s, 3),
            "drafted": self.drafted,
            "accepted": self.accepted,
            "prompt_tokens": self.prompt_tokens,
            "text": self.text,
            "error": self.error,
        }


#: What a peer may fail with while it starts or answers: its error is recorded, the rest go on.
PEER_ERRORS = (PeerError, OSError, KeyError, ValueError, RuntimeError)

#: A started peer's answer to one prompt.
Ask = Callable[[PeerPrompt], PeerRecord]


def _server_record(
    server: ServerProcess, config: PeerConfig, p: PeerPrompt, *, repeat: int, max_tokens: int
) -> PeerRecord:
    reply = server.chat(p.messages, max_tokens=max_tokens)
    timings = reply.timings
    return PeerRecord(
        config.name,
        p.id,
        p.category,
        repeat,
        tokens=reply.tokens,
        tok_s=reply.decode_tok_s,
        drafted=reply.drafted,
        accepted=reply.accepted,
        text=reply.text,
        prompt_tokens=int(timings.get("prompt_n", 0)) + int(timings.get("cache_n", 0)),
    )


def _python_record(
    llm: Any, config: PeerConfig, p: PeerPrompt, *, repeat: int, max_tokens: int
) -> PeerRecord:
    got = answer(llm, p.tokens, max_tokens=max_tokens)
    return PeerRecord(
        config.name,
        p.id,
        p.category,
        repeat,
        tokens=got.tokens,
        tok_s=got.decode_tok_s,
        text=got.text,
        prompt_tokens=len(p.tokens),
        token_ids=got.token_ids,
    )


def _start(
    config: PeerConfig,
    settings: ServerSettings,
    binary: Path | None,
    stack: ExitStack,
    *,
    repeat: int,
    max_tokens: int,
) -> Ask:
    """Start `config`'s peer, kept alive by `stack`; how to ask it a prompt."""
    server = _server(config, settings, binary)
    if server is None:
        llm = stack.enter_context(loaded(settings, lookup=config.lookup))
        return lambda p: _python_record(llm, config, p, repeat=repeat, max_tokens=max_tokens)
    try:
        stack.enter_context(server)
    except BaseException:
        server.close()
        raise
    return lambda p: _server_record(server, config, p, repeat=repeat, max_tokens=max_tokens)


def _server(
    config: PeerConfig, settings: ServerSettings, binary: Path | None
) -> ServerProcess | None:
    """The server process `config` runs (None: llama-cpp-python, in this process)."""
    if config.specchat_mode is not None:
        return SpecChatServer(settings, config.draft, config.specchat_mode)
    if config.server_args is not None:
        assert binary is not None
        return LlamaServer(binary, settings, config.server_args)
    return None


def _failed(
    config: PeerConfig,
    prompts: Sequence[PeerPrompt],
    repeat: int,
    records: Sequence[PeerRecord],
    error: Exception,
) -> list[PeerRecord]:
    """A record naming the error for every prompt the peer had not answered when it failed."""
    done = {r.prompt for r in records}
    return [
        PeerRecord(config.name, p.id, p.category, repeat, error=str(error)[:300])
        for p in prompts
        if p.id not in done
    ]


def run_peers(
    configs: Sequence[PeerConfig],
    prompts: Sequence[PeerPrompt],
    settings: ServerSettings,
    *,
    binary: Path | None,
    max_tokens: int,
    repeat: int = 1,
    progress: Callable[[int, int, str], None] | None = None,
    free_memory: Callable[[], int | None] = available_memory,
) -> list[PeerRecord]:
    """Every peer over every prompt, `repeat` passes. Each pass starts its peers afresh
    (start-up and warm-up untimed), as many together as memory holds (`free_memory`: bytes
    free now, None where unknown: then one at a time), and the peers alive together answer
    each prompt one after another in an order that turns from prompt to prompt (turn_order):
    a prompt's answers are timed within seconds of each other, so a busy spell of the
    machine falls on every peer alike rather than on whichever ran then. A llama-server peer
    without `binary` is left out; a peer that fails gets its error on each prompt it had
    not answered, and the others go on."""
    runnable = [c for c in configs if not c.is_server or binary is not None]
    records: list[PeerRecord] = []
    total = len(runnable) * len(prompts) * repeat
    done = 0

    def report(label: str) -> None:
        if progress:
            progress(done, total, label)

    for rep in range(repeat):
        waiting = turn_order(runnable, rep)
        while waiting:
            with ExitStack() as stack:
                alive: list[tuple[PeerConfig, Ask]] = []
                while waiting and (not alive or _fits(waiting[0], settings, free_memory)):
                    config = waiting.pop(0)
                    report(f"pass {rep + 1}: starting {config.name}")
                    try:
                        ask = _start(
                            config, settings, binary, stack, repeat=rep, max_tokens=max_tokens
                        )
                    except PEER_ERRORS as error:
                        records += _failed(config, prompts, rep, [], error)
                        done += len(prompts)
                        continue
                    alive.append((config, ask))
                answered: dict[str, list[PeerRecord]] = {c.name: [] for c, _ in alive}
                broken: set[str] = set()
                for index, prompt in enumerate(prompts):
                    for config, ask in turn_order(alive, index):
                        if config.name in broken:
                            continue
                        try:
                            record = ask(prompt)
                        except PEER_ERRORS as error:
                            broken.add(config.name)
                            records += _failed(config, prompts, rep, answered[config.name], error)
                            continue
                        answered[config.name].append(record)
                        records.append(record)
                    done += len(alive)
                    report(f"pass {rep + 1}: {prompt.id} ({len(alive)} peers side by side)")
    return records


def _fits(
    config: PeerConfig, settings: ServerSettings, free_memory: Callable[[], int | None]
) -> bool:
    """Whether `config`'s peer can start beside those already alive."""
    return fits(footprint(settings.target, config.files_beside_target), free_memory())
