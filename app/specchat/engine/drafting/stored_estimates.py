"""What a pair's drafters learnt, stored beside its cost tables and read back at its next load."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from specchat.engine.costs.priors import (
    ESTIMATES_MIN_OBSERVED,
    ESTIMATES_SESSION_CAP,
    ESTIMATES_VERSION,
)
from specchat.engine.drafting.base import Drafter, Estimates
from specchat.engine.types import RoundResult, StopReason

#: An answer during which other processes used more than this share of a core, on average,
#: was answered on a busy machine: what it taught is not stored (as profiling.py drops a
#: pass timed while the machine was busy).
BUSY_SHARE = 0.25

#: Stored states: by drafter name, by estimate name (see Estimates.of), its `learnt` data.
States = dict[str, dict[str, dict[str, object]]]


def _read(path: Path, key: Mapping[str, object]) -> States:
    """The states stored at `path` for `key`; none where the file is missing, unreadable, of
    another version or written for another pair."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("key") != json.loads(json.dumps(key)):
        return {}
    return _states(data)


def _states(data: object) -> States:
    """The drafters' states in a stored file's data; none where it is of another version."""
    if not isinstance(data, dict) or data.get("version") != ESTIMATES_VERSION:
        return {}
    drafters = data.get("drafters")
    if not isinstance(drafters, dict):
        return {}
    return {
        name: {e: dict(state) for e, state in estimates.items() if isinstance(state, dict)}
        for name, estimates in drafters.items()
        if isinstance(estimates, dict)
    }


def _resume(drafter: Drafter, states: Mapping[str, Mapping[str, object]]) -> None:
    """Start each of `drafter`'s estimates from its stored state, where there is one (one
    written for other bands keeps its priors)."""
    for name, estimate in Estimates.of(drafter).items():
        state = states.get(name)
        if state is not None:
            with contextlib.suppress(ValueError):
                estimate.resume(state)


def _observed(state: Mapping[str, object]) -> float:
    value = state.get("observed", 0.0)
    return float(value) if isinstance(value, int | float) else 0.0


def bounded(start: Mapping[str, object], end: Mapping[str, object]) -> dict[str, object] | None:
    """What to store of an estimate that went from `start` (where the session began it) to
    `end`: None where the session observed too little to say (ESTIMATES_MIN_OBSERVED), else
    `end`, moved back towards `start` where the session observed more than
    ESTIMATES_SESSION_CAP, so that one session moves it by a bounded amount."""
    seen = _observed(end) - _observed(start)
    if seen < ESTIMATES_MIN_OBSERVED:
        return None
    share = min(1.0, ESTIMATES_SESSION_CAP / seen)
    if share >= 1.0:
        return dict(end)
    state: dict[str, object] = {}
    for name, last in end.items():
        first = start.get(name)
        if isinstance(last, list) and isinstance(first, list) and len(first) == len(last):
            state[name] = [a + (b - a) * share for a, b in zip(first, last, strict=True)]
        elif isinstance(last, int | float) and isinstance(first, int | float):
            state[name] = first + (last - first) * share
        else:
            state[name] = last
    return state


class StoredEstimates(Estimates):
    """The drafters' estimates started where the pair's earlier sessions left them, and what
    this session learns stored for the next: the cost table's rules for what a session may
    store, for acceptance.

    - Only answers that ended normally count: the state after the last one that did is what
      is stored; an answer cancelled, cut short (its rounds no longer asked for) or answered
      on a busy machine (BUSY_SHARE; `mark_busy`) leaves it as it was.
    - Only estimates the session observed enough of, each by a bounded amount (`bounded`).
    - A file of another version or pair is ignored, and one that cannot be read; an
      estimate whose stored state is not its own keeps its priors.

    Attributes:
        path: the file, beside the pair's cost tables.
        key: what it is valid for: the pair's models and heads, backend, threads and context
            band (their cost tables' keys).
        other_cpu: CPU seconds other processes have used (profiling.other_cpu_seconds).
        clock: seconds.
    """

    def __init__(
        self,
        path: Path,
        key: Mapping[str, object],
        *,
        other_cpu: Callable[[], float],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self.key = key
        self.other_cpu = other_cpu
        self.clock = clock
        self._stored = _read(path, key)
        self._drafters: dict[str, Drafter] = {}
        self._started: States = {}  # each estimate as this session started it
        self._kept: States | None = None  # as the last clean answer left them
        self._answer: tuple[float, float] | None = None  # its start: (clock, other_cpu)
        self._busy = False

    @classmethod
    def beside(
        cls, folder: Path, key: Mapping[str, object], *, other_cpu: Callable[[], float]
    ) -> StoredEstimates:
        """The estimates stored beside the cost tables in `folder` for `key` (in a folder of
        their own: the tables' folder holds tables only)."""
        text = json.dumps(key, sort_keys=True)
        digest = hashlib.sha256(text.encode()).hexdigest()[:20]
        return cls(folder / "estimates" / f"{digest}.json", key, other_cpu=other_cpu)

    def start(self, drafter: Drafter) -> None:
        self._drafters[drafter.name] = drafter
        _resume(drafter, self._stored.get(drafter.name, {}))
        self._started[drafter.name] = {
            name: dict(estimate.learnt()) for name, estimate in Estimates.of(drafter).items()
        }

    def watching(self, rounds: Iterator[RoundResult]) -> Iterator[RoundResult]:
        """An answer's rounds, noting how it ends (see the class)."""
        try:
            for result in rounds:
                if self._answer is None:
                    self._answer = (self.clock(), self.other_cpu())
                    self._busy = False
                if result.stop is not None:
                    self._ended(result.stop)
                yield result
        finally:
            self._answer = None
            close = getattr(rounds, "close", None)
            if close is not None:
                close()

    def mark_busy(self) -> None:
        """The machine was busy during the answer now running: it teaches nothing stored."""
        self._busy = True

    def _ended(self, stop: StopReason) -> None:
        if self._answer is None:
            return
        began, cpu = self._answer
        self._answer = None
        wall = self.clock() - began
        busy = self._busy or self.other_cpu() - cpu > BUSY_SHARE * wall
        if stop is StopReason.CANCELLED or busy:
            return
        self._kept = {
            name: {e: dict(estimate.learnt()) for e, estimate in Estimates.of(drafter).items()}
            for name, drafter in self._drafters.items()
        }

    def save(self) -> bool:
        """Store what the answers that ended normally taught (the rules in the class); True
        where the file was written. Atomic: a crash mid-write leaves the old file."""
        if self._kept is None:
            return False
        merged: States = {name: dict(states) for name, states in self._stored.items()}
        for name, states in self._kept.items():
            for estimate, end in states.items():
                state = bounded(self._started.get(name, {}).get(estimate, {}), end)
                if state is not None:
                    merged.setdefault(name, {})[estimate] = state
        self._kept = None
        data = {"version": ESTIMATES_VERSION, "key": self.key, "drafters": merged}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_suffix(".part")
        partial.write_text(json.dumps(data, indent=1), encoding="utf-8")
        os.replace(partial, self.path)
        return True

    def stored(self) -> States:
        """What the file held when the pair was loaded."""
        return {name: dict(states) for name, states in self._stored.items()}


class EstimatesFileError(ValueError):
    """A stored estimates file cannot be started from; the message says why."""


class FileEstimates(Estimates):
    """Every drafter starts where a stored estimates file left it, whatever pair the file
    names: a replay has no models to key it on, and prices answers recorded with a pair as
    a fresh window or server of that pair would start them. Nothing is written back.

    Attributes:
        path: the file (a store's cache/costs/estimates/*.json).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as error:
            raise EstimatesFileError(f"cannot read {path}: {error.strerror or error}") from None
        except ValueError:
            raise EstimatesFileError(f"{path} is not a stored estimates file (not JSON)") from None
        self._stored = _states(data)
        if not self._stored:
            raise EstimatesFileError(
                f"{path} holds no estimates SpecChat can start from "
                f"(another version, or no drafter's; this SpecChat writes version "
                f"{ESTIMATES_VERSION})"
            )

    def start(self, drafter: Drafter) -> None:
        _resume(drafter, self._stored.get(drafter.name, {}))
