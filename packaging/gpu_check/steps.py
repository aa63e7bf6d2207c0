"""One step of the check: timed, in a process of its own, its failure recorded, never raised."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

#: Characters of a failed step's output kept in the report: the end, where the error is.
TAIL = 4000


@dataclass
class StepResult:
    """What one step did.

    Attributes:
        name: the step, as the report lists it ("build", "costs:llama-8b", ...).
        status: "ok", "failed" or "skipped".
        seconds: its wall time.
        error: why it failed or was skipped ("" when ok).
        data: what it measured (the step's own JSON).
        log_tail: the end of its output, when it failed.
    """

    name: str
    status: str = "ok"
    seconds: float = 0.0
    error: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    log_tail: str = ""

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["seconds"] = round(self.seconds, 2)
        return out


def skipped(name: str, why: str) -> StepResult:
    return StepResult(name, status="skipped", error=why)


def in_process(name: str, work: Callable[[], dict[str, Any]], *, log: Path) -> StepResult:
    """Run `work` here (steps that need only the standard library), timed; an exception
    becomes the step's error, with the end of what it wrote to `log` (a build's output)."""
    began = time.perf_counter()
    start = log.stat().st_size if log.exists() else 0
    try:
        data = work()
    except Exception as error:
        seconds = time.perf_counter() - began
        why = f"{type(error).__name__}: {error}"
        text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
        return StepResult(name, "failed", seconds, why, log_tail=_tail(text, start))
    return StepResult(name, "ok", time.perf_counter() - began, data=data)


def in_child(
    name: str,
    module: str,
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    results: Path,
    log: Path,
    timeout: float,
) -> StepResult:
    """Run `python -m gpu_check.<module> --result FILE ARGS` in a process of its own (a
    crash in llama.cpp, a CUDA abort, ends that process only), timed and bounded by
    `timeout` seconds; its output goes to `log`, its result JSON to a file in `results`."""
    results.mkdir(parents=True, exist_ok=True)
    result_file = results / (name.replace(":", "-").replace("/", "-") + ".json")
    result_file.unlink(missing_ok=True)
    # faulthandler: a crash inside llama.cpp or CUDA leaves the Python stack in the log.
    command = [sys.executable, "-X", "faulthandler", "-m", f"gpu_check.{module}"]
    command += ["--result", str(result_file), *args]
    began = time.perf_counter()
    with log.open("a", encoding="utf-8") as out:
        out.write(f"\n=== {name}: {' '.join(command)}\n")
        out.flush()
        start = out.tell()
        try:
            code = subprocess.run(
                command,
                env={**os.environ, **env},
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=max(1.0, timeout),
            ).returncode
            why = "" if code == 0 else f"exit status {code}"
        except subprocess.TimeoutExpired:
            why = f"stopped after {timeout:.0f} s (the run's time budget)"
    seconds = time.perf_counter() - began
    data: dict[str, Any] = {}
    if result_file.exists():
        try:
            data = json.loads(result_file.read_text(encoding="utf-8"))
        except ValueError as error:
            why = why or f"unreadable result: {error}"
        else:
            why = str(data.get("error") or why)
    elif not why:
        why = "wrote no result"
    if not why:
        return StepResult(name, "ok", seconds, data=data)
    text = log.read_text(encoding="utf-8", errors="replace")
    return StepResult(name, "failed", seconds, why, data, _tail(text, start))


def _tail(text: str, start: int) -> str:
    """The end of what this step wrote to the log (it starts at byte `start`)."""
    mine = text.encode("utf-8", errors="replace")[start:].decode("utf-8", errors="replace")
    return mine[-TAIL:]
