"""The server itself: the app under uvicorn, on a thread of its own or in the foreground."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import uvicorn

from specchat.host.thread import HostThread
from specchat.serve.app import ServedModel, build_app, served_model
from specchat.serve.executor import Executor
from specchat.serve.guard import ServeOptions, check_options

if TYPE_CHECKING:
    from specchat.engine.llamacpp.prefix_cache import PrefixCache
    from specchat.engine.session import ChatEngine


@dataclass(frozen=True)
class Address:
    """Where the server listens.

    Attributes:
        host: the address bound.
        port: the port bound (the real one when 0 was asked).
    """

    host: str
    port: int

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"


class ApiServer:
    """The HTTP server in front of an executor (an engine host).

    Attributes:
        options: how it listens and what it allows.
        executor: what runs the jobs on the engine's thread.
        served: what it answers as now (the model's name, its modes, its context).
        address: where it listens, once started.
    """

    def __init__(
        self, executor: Executor, served: Callable[[], ServedModel], options: ServeOptions
    ) -> None:
        check_options(options)
        self.options = options
        self.executor = executor
        self._served = served
        self.app = build_app(executor, served, options)
        self.address: Address | None = None
        self._socket: socket.socket | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @classmethod
    def for_engine(
        cls,
        engine: ChatEngine,
        options: ServeOptions,
        *,
        calibrate_plain: bool = True,
        profile: bool = True,
        prefixes: PrefixCache | None = None,
    ) -> ApiServer:
        """A server with an engine host on a thread of its own over `engine` (`specchat
        serve`)."""
        executor = HostThread(
            engine,
            capacity=options.capacity,
            calibrate_plain=calibrate_plain,
            profile=profile,
            prefixes=prefixes,
        )
        served = served_model(engine)
        return cls(executor, lambda: served, options)

    @property
    def served(self) -> ServedModel:
        return self._served()

    def bind(self) -> Address:
        """Open the listening socket (OSError when the address is taken)."""
        family = socket.AF_INET6 if ":" in self.options.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.options.host, self.options.port))
        except OSError:
            sock.close()
            raise
        sock.listen(128)
        self._socket = sock
        host, port = sock.getsockname()[:2]
        self.address = Address(str(host), int(port))
        return self.address

    def _uvicorn(self) -> uvicorn.Server:
        config = uvicorn.Config(
            self.app, log_level="warning", lifespan="off", access_log=False, timeout_keep_alive=30
        )
        self._server = uvicorn.Server(config)
        return self._server

    def serve_forever(self) -> None:
        """Run in the foreground until Ctrl-C (uvicorn handles the signal), then stop."""
        sock = self._socket
        if sock is None:
            self.bind()
            sock = self._socket
        assert sock is not None
        self.executor.start()
        try:
            self._uvicorn().run(sockets=[sock])
        finally:
            self.executor.stop()
            self._close_socket()

    def start(self) -> Address:
        """Serve on a thread of its own; returns once it accepts connections."""
        address = self.address or self.bind()
        sock = self._socket
        assert sock is not None
        self.executor.start()
        server = self._uvicorn()
        self._thread = threading.Thread(
            target=lambda: asyncio.run(server.serve(sockets=[sock])),
            name="specchat-api",
            daemon=True,
        )
        self._thread.start()
        while not server.started and self._thread.is_alive():
            threading.Event().wait(0.01)
        return address

    def stop(self, *, timeout_s: float = 10.0) -> bool:
        """Stop accepting, cancel what runs, wait a bounded time; True once both ended."""
        if self._server is not None:
            self._server.should_exit = True
        stopped = self.executor.stop(timeout_s=timeout_s)
        if self._thread is not None:
            self._thread.join(timeout_s)
            stopped = stopped and not self._thread.is_alive()
        self._close_socket()
        return stopped

    def _close_socket(self) -> None:
        if self._socket is not None:
            with contextlib.suppress(OSError):
                self._socket.close()
            self._socket = None
