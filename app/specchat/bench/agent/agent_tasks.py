"""The agent bench's tasks (a small repository, an instruction, a check) and the tools the
scripted agent answers locally: list, read and write the repository's files, run its check."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from specchat.bench.prompts import PromptFileError

#: Tasks the agent bench was written and tried on.
AGENT_TASKS = Path(__file__).with_name("agent-tasks.jsonl")
#: Tasks kept back: never run while the bench or the policy was being shaped.
HELD_BACK_TASKS = Path(__file__).with_name("agent-held-back-tasks.jsonl")
#: Tasks that read a file of 100 to 300 lines and write it back changed (a rename, a new
#: method, a fixed bug): where an agent's calls copy most. The file comes through read_file,
#: or attached to the request raw (as an editor's agent sends the open file), where the
#: model writes it back inside a JSON string.
WRITE_BACK_TASKS = Path(__file__).with_name("agent-write-back-tasks.jsonl")
#: The small tasks, by name: the tuning set and the one held back from it.
AGENT_SETS = {"agent": AGENT_TASKS, "agent-held-back": HELD_BACK_TASKS}
#: Every task set `--prompts` knows by name.
AGENT_SETS_BY_NAME = {**AGENT_SETS, "agent-write-back": WRITE_BACK_TASKS}

#: What the agent is told before its task.
SYSTEM = (
    "You are a coding agent working in a small Python repository that only the tools can "
    "reach. Work step by step, one tool call at a time: read the files you need, write each "
    "changed file whole, then run the check. Once the check passes, call finish."
)
#: Characters of a tool's result the agent sends back (a check's output can be long).
RESULT_CHARS = 4000
#: Seconds a check may run.
CHECK_TIMEOUT_S = 30.0

_KEYS = {"id", "instruction", "files", "check"}


@dataclass(frozen=True)
class AgentTask:
    """One task of the agent bench.

    Attributes:
        id: unique name, used in the report.
        instruction: what the user asks the agent.
        files: the repository: relative path to text.
        check: the file the check runs (with Python, in the repository); the agent may not
            write it.
    """

    id: str
    instruction: str
    files: tuple[tuple[str, str], ...]
    check: str


def _function(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    parameters = {"type": "object", "properties": properties, "required": list(properties)}
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


_PATH = {"type": "string", "description": "the file's path, relative to the repository"}
#: The tools offered, in OpenAI's shape.
TOOLS: tuple[dict[str, Any], ...] = (
    _function("list_files", "List the repository's files.", {}),
    _function("read_file", "Read a file of the repository.", {"path": _PATH}),
    _function(
        "write_file",
        "Write a file of the repository (its whole new text).",
        {"path": _PATH, "content": {"type": "string", "description": "the file's new text"}},
    ),
    _function("run_check", "Run the repository's check; its output says what failed.", {}),
    _function(
        "finish",
        "Say the task is done (refused while the check fails).",
        {"summary": {"type": "string", "description": "one sentence: what you changed"}},
    ),
)
#: The call that ends the agent's loop.
FINISH = "finish"


class Toolbox:
    """The tools of one task, over a copy of its repository in `root`.

    Attributes:
        task: the task.
        root: the repository's folder.
    """

    def __init__(self, task: AgentTask, root: Path) -> None:
        self.task = task
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        for name, text in task.files:
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")

    def call(self, name: str, arguments: str) -> str:
        """A call's result, as the agent sends it back; a bad call gets an error the model
        can read, never an exception."""
        try:
            values = json.loads(arguments) if arguments.strip() else {}
        except ValueError as error:
            return f"error: the arguments are not valid JSON ({error})"
        if not isinstance(values, dict):
            return "error: the arguments must be a JSON object"
        try:
            if name == "list_files":
                return "\n".join(self._files())
            if name == "read_file":
                return self._path(values).read_text(encoding="utf-8")[:RESULT_CHARS]
            if name == "write_file":
                return self._write(values)
            if name == "run_check":
                return self.check()[1]
            if name == FINISH:
                passed, said = self.check()
                return "done" if passed else f"error: not done yet, the {said}"
        except (OSError, UnicodeDecodeError, ValueError) as error:
            return f"error: {error}"
        return f"error: there is no tool {name!r}; the tools are " + ", ".join(
            tool["function"]["name"] for tool in TOOLS
        )

    def check(self) -> tuple[bool, str]:
        """Run the check: whether it passed, and what it said."""
        try:
            done = subprocess.run(
                [sys.executable, self.task.check],
                cwd=self.root,
                capture_output=True,
                text=True,
                timeout=CHECK_TIMEOUT_S,
                env=_check_env(),
                check=False,
            )
        except subprocess.TimeoutExpired:
            return False, f"the check ran longer than {CHECK_TIMEOUT_S:g} s and was stopped"
        said = (done.stdout + done.stderr).strip()
        verdict = "passed" if done.returncode == 0 else f"failed (exit code {done.returncode})"
        return done.returncode == 0, f"check {verdict}\n{said}"[:RESULT_CHARS]

    def _files(self) -> list[str]:
        return sorted(
            path.relative_to(self.root).as_posix()
            for path in self.root.rglob("*")
            if path.is_file() and "__pycache__" not in path.parts
        )

    def _path(self, values: dict[str, Any]) -> Path:
        """A path the agent named, inside the repository only."""
        name = values.get("path")
        if not isinstance(name, str) or not name.strip():
            raise ValueError("'path' must name a file")
        relative = PurePosixPath(name.strip().removeprefix("./"))
        if relative.is_absolute() or ".." in relative.parts:
            raise ValueError(f"{name!r} is outside the repository")
        return self.root / relative

    def _write(self, values: dict[str, Any]) -> str:
        path = self._path(values)
        content = values.get("content")
        if not isinstance(content, str):
            raise ValueError("'content' must be the file's text")
        if path == self.root / self.task.check:
            raise ValueError(f"{self.task.check} is the check; it may not be changed")
        content = unfenced(content)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        return f"wrote {len(content.encode('utf-8'))} bytes to {path.relative_to(self.root)}"


#: A whole text wrapped in one Markdown code fence (```python … ```).
_FENCED = re.compile(r"\A\s*```[\w+-]*[ \t]*\n(.*?\n)?[ \t]*```\s*\Z", re.DOTALL)


def unfenced(content: str) -> str:
    """A file's text without the Markdown code fence a small model wraps it in (coding
    agents' write tools drop it too); any other text as it is."""
    fenced = _FENCED.match(content)
    return content if fenced is None else fenced.group(1) or ""


def _check_env() -> dict[str, str]:
    """The check's environment: the PATH (and Windows' SYSTEMROOT, without which Python
    cannot start there), nothing of the user's own settings."""
    kept = {key: os.environ[key] for key in ("PATH", "SYSTEMROOT") if key in os.environ}
    return {**kept, "PYTHONDONTWRITEBYTECODE": "1"}


def load_tasks(path: Path) -> tuple[AgentTask, ...]:
    """Read a task file (JSON Lines of {id, instruction, files, check})."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise PromptFileError(f"cannot read task file {path}: {error.strerror}") from None
    tasks: list[AgentTask] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            tasks.append(_task(line, f"{path}:{number}", {t.id for t in tasks}))
    if not tasks:
        raise PromptFileError(f"{path}: no tasks in the file")
    return tuple(tasks)


def _task(line: str, where: str, seen: set[str]) -> AgentTask:
    try:
        item = json.loads(line)
    except ValueError as error:
        raise PromptFileError(f"{where}: not valid JSON ({error})") from None
    if not isinstance(item, dict) or set(item) != _KEYS:
        raise PromptFileError(f"{where}: a task is an object of {', '.join(sorted(_KEYS))}")
    files = item["files"]
    if not isinstance(files, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in files.items()
    ):
        raise PromptFileError(f"{where}: 'files' must map paths to text")
    for key in ("id", "instruction", "check"):
        if not isinstance(item[key], str) or not item[key].strip():
            raise PromptFileError(f"{where}: {key!r} must be a non-empty string")
    if item["check"] not in files:
        raise PromptFileError(f"{where}: the check {item['check']!r} is not among 'files'")
    if item["id"] in seen:
        raise PromptFileError(f"{where}: duplicate id {item['id']!r}")
    return AgentTask(item["id"], item["instruction"], tuple(files.items()), item["check"])
