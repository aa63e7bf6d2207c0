"""Runs every peer on every prompt, `repeat` times, one peer in memory at a time."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specchat.bench.peers.configs import PeerConfig
from specchat.bench.peers.llama_server import LlamaServer, ServerSettings
from specchat.bench.peers.python_peer import answer, loaded
from specchat.bench.peers.server_process import PeerError, ServerProcess
from specchat.bench.peers.specchat_server import SpecChatServer


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


def _server_records(
    server: ServerProcess,
    config: PeerConfig,
    prompts: Sequence[PeerPrompt],
    *,
    repeat: int,
    max_tokens: int,
) -> list[PeerRecord]:
    records = []
    try:
        with server:
            for p in prompts:
                reply = server.chat(p.messages, max_tokens=max_tokens)
                timings = reply.timings
                records.append(
                    PeerRecord(
                        config.name,
                        p.id,
                        p.category,
                        repeat,
                        tokens=reply.tokens,
                        tok_s=reply.decode_tok_s,
                        drafted=reply.drafted,
                        accepted=reply.accepted,
                        text=reply.text,
                        prompt_tokens=int(timings.get("prompt_n", 0))
                        + int(timings.get("cache_n", 0)),
                    )
                )
    except (PeerError, OSError, KeyError, ValueError) as error:
        records += _failed(config, prompts, repeat, records, error)
    return records


def _python_records(
    settings: ServerSettings,
    config: PeerConfig,
    prompts: Sequence[PeerPrompt],
    *,
    repeat: int,
    max_tokens: int,
) -> list[PeerRecord]:
    records = []
    try:
        with loaded(settings, lookup=config.lookup) as llm:
            for p in prompts:
                got = answer(llm, p.tokens, max_tokens=max_tokens)
                records.append(
                    PeerRecord(
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
                )
    except (ValueError, RuntimeError, OSError) as error:
        records += _failed(config, prompts, repeat, records, error)
    return records


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
) -> list[PeerRecord]:
    """Every peer over every prompt, each pass over the set starting at another peer so
    slow drift of the machine is shared. Each server (llama-server's, SpecChat's) is fresh
    for its pass (start-up and warm-up untimed). A llama-server peer without `binary` is
    left out."""
    runnable = [c for c in configs if not c.is_server or binary is not None]
    records: list[PeerRecord] = []
    total = len(runnable) * repeat
    done = 0
    for rep in range(repeat):
        shift = rep % max(1, len(runnable))
        for config in runnable[shift:] + runnable[:shift]:
            if progress:
                progress(done, total, config.name)
            server = _server(config, settings, binary)
            if server is not None:
                records += _server_records(
                    server, config, prompts, repeat=rep, max_tokens=max_tokens
                )
            else:
                records += _python_records(
                    settings, config, prompts, repeat=rep, max_tokens=max_tokens
                )
            done += 1
            if progress:
                progress(done, total, config.name)
    return records
