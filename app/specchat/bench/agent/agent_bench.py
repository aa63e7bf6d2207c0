"""`specchat bench --prompts agent`: each task run by the scripted agent through `specchat
serve`, plain and auto side by side, both starting alike."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specchat.bench.agent.agent_loop import AgentRun, run_task
from specchat.bench.agent.agent_styles import speaking
from specchat.bench.agent.agent_tasks import AgentTask
from specchat.engine.session import ChatEngine
from specchat.host.tool_copies import forget_tool_results

#: The modes compared: the plain decoder, and what SpecChat answers with by default.
MODES = ("plain", "auto")


@dataclass(frozen=True)
class AgentPair:
    """One task, run in each mode.

    Attributes:
        task: the task's id.
        plain: the plain decoder's run.
        auto: auto's run.
    """

    task: str
    plain: AgentRun
    auto: AgentRun

    @property
    def same(self) -> bool:
        """Whether both runs said the same, turn by turn (exactness at T = 0: if not, the
        turns compared after the first difference are not the same requests)."""
        return [t.answer for t in self.plain.turns] == [t.answer for t in self.auto.turns]


def level(engine: ChatEngine) -> None:
    """Start a run as the other mode's started: empty caches, nothing of the earlier run in
    the suffix index, its chat or its tool results (each run also gets a server, and a
    prefix cache, of its own)."""
    for model in (engine.target, engine.draft):
        if model is not None:
            model.sync(())
    engine.said.forget_chat()
    forget_tool_results(engine)


def _run(
    engine: ChatEngine,
    task: AgentTask,
    mode: str,
    work: Path,
    *,
    max_tokens: int,
    max_turns: int,
    variables: dict[str, Any],
) -> AgentRun:
    from specchat.engine.llamacpp.prefix_cache import PrefixCache
    from specchat.serve.guard import ServeOptions
    from specchat.serve.server import ApiServer

    level(engine)
    server = ApiServer.for_engine(
        engine, ServeOptions(port=0), calibrate_plain=False, profile=False, prefixes=PrefixCache()
    )
    address = server.start()
    # The same folder for both modes: a check's traceback names its files' paths, and the
    # two runs must send the same results.
    root = work / task.id
    shutil.rmtree(root, ignore_errors=True)
    try:
        return run_task(
            address.host,
            address.port,
            task,
            root,
            mode=mode,
            max_tokens=max_tokens,
            max_turns=max_turns,
            template_variables=variables,
        )
    finally:
        server.stop()


def measure_agents(
    engine: ChatEngine,
    tasks: Sequence[AgentTask],
    *,
    max_tokens: int,
    max_turns: int,
    progress: Callable[[int, int], None] | None = None,
    style: str = "own",
) -> list[AgentPair]:
    """Every task in both modes (which goes first alternates, so a slow spell of the machine
    is shared); each run's repository is a fresh copy, removed afterwards. A turn answers in
    `max_tokens` at most; a task stops after `max_turns` requests. `style`: the tool-call
    style the chats are rendered in (agent_styles.STYLES)."""
    results: list[AgentPair] = []
    done = 0
    with (
        tempfile.TemporaryDirectory(prefix="specchat-agent-") as folder,
        speaking(engine, style) as variables,
    ):
        for number, task in enumerate(tasks):
            order = MODES if number % 2 == 0 else MODES[::-1]
            runs: dict[str, AgentRun] = {}
            for mode in order:
                runs[mode] = _run(
                    engine,
                    task,
                    mode,
                    Path(folder),
                    max_tokens=max_tokens,
                    max_turns=max_turns,
                    variables=variables,
                )
                done += 1
                if progress is not None:
                    progress(done, len(tasks) * len(MODES))
            results.append(AgentPair(task.id, runs["plain"], runs["auto"]))
    return results
