"""A helper process that compiles and renders chat templates under a hard time and memory limit."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.util import spawnv_passfds
from typing import Any

from specchat.engine.templates.guards import (
    PREFIX,
    ChatTemplateError,
    ChatTemplateProblem,
    RenderLimits,
    limit_error,
)

#: Address space the host process may use. Real templates need a few MB; the sandbox's own
#: limits keep well-behaved refusals far below this, which only catches the rest.
MEMORY_BYTES = 1 << 30
#: Beyond a rendering's own time limit, what the host may take before it is killed (the
#: sandbox polls its deadline at every hook; this covers a single call that never returns).
GRACE_S = 1.0
#: Seconds a fresh host may take to start and import Jinja.
START_S = 60.0
#: Compiled templates the host keeps (one or two models' templates in practice).
_CACHE = 16
#: Audit events no template has a reason to cause: refused inside the host, whatever the
#: sandbox let through.
_FORBIDDEN_EVENTS = (
    "os.system",
    "subprocess.Popen",
    "os.exec",
    "os.posix_spawn",
    "os.fork",
    "os.forkpty",
    "os.spawn",
    "pty.spawn",
    "ctypes.dlopen",
    "socket.connect",
    "os.remove",
    "os.rename",
    "os.mkdir",
    "shutil.rmtree",
)


@dataclass(frozen=True)
class TemplateSpec:
    """Everything that defines one compiled template.

    Attributes:
        source: the Jinja source, or None for the fallback.
        bos_token, eos_token: passed to the template.
        limits: bounds of each rendering.
    """

    source: str | None
    bos_token: str
    eos_token: str
    limits: RenderLimits


class TemplateHost:
    """One long-lived process that compiles and renders templates, one request at a time.

    A Python thread cannot be stopped inside one long call (a filter sorting millions of
    items); a process can. A request that runs past its time limit kills the process, which
    is started again for the next request; one that runs out of memory ends there too.

    Attributes:
        memory_bytes: the address-space limit of the process.
        grace_s: time allowed beyond a rendering's own limit before the process is killed.
        restarts: how many times the process was started.
    """

    def __init__(self, *, memory_bytes: int = MEMORY_BYTES, grace_s: float = GRACE_S) -> None:
        self.memory_bytes = memory_bytes
        self.grace_s = grace_s
        self.restarts = 0
        self._lock = threading.Lock()
        self._process: _Child | None = None
        self._conn: Any = None

    def compile(self, spec: TemplateSpec) -> None:
        """Raise ChatTemplateError if `spec` does not compile (nothing of it runs here)."""
        self._ask(spec, "compile", {})

    def render(self, spec: TemplateSpec, **request: Any) -> str:
        result = self._ask(spec, "render", request)
        assert isinstance(result, str)
        return result

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _ask(self, spec: TemplateSpec, op: str, request: Mapping[str, Any]) -> Any:
        with self._lock:
            conn = self._start()
            try:
                conn.send((op, spec, dict(request)))
                ready = conn.poll(spec.limits.time_s + self.grace_s)
                answer = conn.recv() if ready else None
            except (EOFError, OSError):
                self._stop()
                raise limit_error("used more memory than allowed (or crashed)") from None
            if answer is None:
                self._stop()
                raise limit_error(f"ran longer than {spec.limits.time_s:g} s")
        kind, *rest = answer
        if kind == "ok":
            return rest[0]
        problem, message = rest
        raise ChatTemplateError(ChatTemplateProblem[problem], message)

    def _start(self) -> Any:
        if self._conn is not None and self._process is not None and self._process.alive():
            return self._conn
        self._stop()
        process, parent = _launch(self.memory_bytes)
        try:
            ready = parent.poll(START_S) and parent.recv() == ("ready",)
        except (EOFError, OSError):
            ready = False
        if not ready:
            process.kill()
            parent.close()
            raise ChatTemplateError(
                ChatTemplateProblem.FAILED, f"{PREFIX} could not be run: its helper did not start"
            )
        self._process, self._conn = process, parent
        self.restarts += 1
        return parent

    def _stop(self) -> None:
        if self._process is not None:
            self._process.kill()
        if self._conn is not None:
            self._conn.close()
        self._process = self._conn = None


class _Child:
    """The host process, started by pid (POSIX) or by multiprocessing (elsewhere, frozen)."""

    def __init__(self, *, pid: int = 0, process: Any = None) -> None:
        self._pid = pid
        self._process = process

    def alive(self) -> bool:
        if self._process is not None:
            return bool(self._process.is_alive())
        try:
            return os.waitpid(self._pid, os.WNOHANG) == (0, 0)
        except ChildProcessError:
            return False

    def kill(self) -> None:
        if self._process is not None:
            if self._process.is_alive():
                self._process.kill()
            self._process.join(5)
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self._pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self._pid, 0)


def _launch(memory_bytes: int) -> tuple[_Child, Any]:
    if getattr(sys, "frozen", False) or os.name != "posix":
        # A bundle cannot run `-c`; multiprocessing re-enters it (freeze_support in main).
        context = multiprocessing.get_context("spawn")
        parent, child = context.Pipe()
        process = context.Process(
            target=serve, args=(child, memory_bytes), name="specchat-templates", daemon=True
        )
        process.start()
        child.close()
        return _Child(process=process), parent
    # A fresh interpreter that imports only what rendering needs: multiprocessing's spawn
    # would re-import the caller's main script, which no library may assume is guarded.
    from_parent, to_child = os.pipe()
    from_child, to_parent = os.pipe()
    code = (
        "import sys; sys.path[:0] = sys.argv[4:]; "
        "from specchat.engine.templates.host import serve_pipes; "
        "serve_pipes(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))"
    )
    args = [sys.executable, "-I", "-c", code, str(from_parent), str(to_parent), str(memory_bytes)]
    args += [str(p) for p in sys.path if isinstance(p, str) and p]
    try:
        pid = spawnv_passfds(os.fsencode(sys.executable), args, (from_parent, to_parent))
    finally:
        os.close(from_parent)
        os.close(to_parent)
    os.set_inheritable(to_child, False)
    return _Child(pid=pid), _Duplex(
        Connection(from_child, writable=False), Connection(to_child, readable=False)
    )


_shared: TemplateHost | None = None
_shared_lock = threading.Lock()


def shared_host() -> TemplateHost:
    """The process's template host, started on first use."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = TemplateHost()
        return _shared


def _refuse_event(event: str, _args: tuple[Any, ...]) -> None:
    if event in _FORBIDDEN_EVENTS:
        raise PermissionError(f"{event} is not allowed while rendering a chat template")


class _Duplex:
    """Two one-way pipes used as one connection."""

    def __init__(self, reader: Connection, writer: Connection) -> None:
        self._reader, self._writer = reader, writer

    def send(self, value: Any) -> None:
        self._writer.send(value)

    def recv(self) -> Any:
        return self._reader.recv()

    def poll(self, timeout: float) -> bool:
        return self._reader.poll(timeout)

    def close(self) -> None:
        self._reader.close()
        self._writer.close()


def serve_pipes(read_fd: int, write_fd: int, memory_bytes: int) -> None:
    """Entry of the host process started by `_launch`."""
    serve(
        _Duplex(Connection(read_fd, writable=False), Connection(write_fd, readable=False)),
        memory_bytes,
    )


def serve(conn: Any, memory_bytes: int) -> None:
    """The host process: answer compile and render requests until the pipe closes."""
    import resource

    from specchat.engine.templates.sandbox import SandboxTemplate

    with contextlib.suppress(ValueError, OSError):
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, hard))
    SandboxTemplate(None).render([{"role": "user", "content": "warm-up"}])
    sys.addaudithook(_refuse_event)
    cache: dict[TemplateSpec, SandboxTemplate] = {}
    conn.send(("ready",))
    while True:
        try:
            op, spec, request = conn.recv()
        except (EOFError, OSError):
            return
        try:
            template = cache.get(spec)
            if template is None:
                template = SandboxTemplate(
                    spec.source,
                    bos_token=spec.bos_token,
                    eos_token=spec.eos_token,
                    limits=spec.limits,
                )
                if len(cache) >= _CACHE:
                    cache.clear()
                cache[spec] = template
            answer: tuple[Any, ...] = ("ok", template.render(**request) if op == "render" else None)
        except ChatTemplateError as error:
            answer = ("error", error.problem.name, error.message)
        except MemoryError:
            answer = ("error", "LIMIT", f"{PREFIX} ran out of memory; SpecChat stopped it")
        except Exception as error:
            answer = ("error", "FAILED", f"{PREFIX} failed: {type(error).__name__}")
        try:
            conn.send(answer)
        except (OSError, ValueError):
            return
