"""The window's "Serve API" switch: an HTTP server over the generation worker's engine host."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Imported when the switch is turned on: the window opens without the server's code.
    from specchat.host.engine_host import EngineHost
    from specchat.host.keeper import ChatKeeper
    from specchat.serve.server import ApiServer
    from specchat.workers.generation_service import GenerationService
    from specchat.workers.host_adapter import HostSignals

#: Where a person sets the window's API key (named when an address needs one).
KEY_FROM = "an API key in File → Settings… (API, Key)"


class ApiService:
    """A server over the window's pair: its jobs queue on the worker's engine host, which
    answers them between the window's answers (no queue of its own here).

    Attributes:
        server: the server while it runs, else None.
        host: the engine host its jobs queue on (the generation worker's).
        events: the host's events as signals (started, round_ready, ended, queue_changed),
            for the widgets.
        keeper: gives the writer of API chats to the conversation store when they are kept
            (asked at each start: the setting may have changed), else None.
    """

    def __init__(
        self,
        service: GenerationService,
        *,
        keeper: Callable[[], ChatKeeper | None] = lambda: None,
    ) -> None:
        self._worker = service.worker
        self.host: EngineHost = service.worker.host
        self.events: HostSignals = service.host_events
        self.keeper = keeper
        self.server: ApiServer | None = None

    def start(self, *, host: str = "127.0.0.1", port: int = 8080, api_key: str = "") -> str:
        """Serve the loaded pair; returns the base URL. ValueError or OSError (the address
        is taken) say why it cannot."""
        from specchat.engine.llamacpp.prefix_cache import PrefixCache
        from specchat.host.job_runner import JobRunner
        from specchat.serve.app import ServedModel, served_model
        from specchat.serve.guard import ServeOptions, check_options
        from specchat.serve.server import ApiServer

        self.stop()
        engine = self._worker.engine
        if engine is None:
            raise ValueError("load a model pair first")
        options = ServeOptions(host=host.strip(), port=port, api_key=api_key)
        check_options(options, key_from=KEY_FROM, port_from="the API port (api.port)")
        keeper = self.keeper()
        # Chats' caches on disk only where the chats are kept (api.remember_chats).
        runner = JobRunner(prefixes=PrefixCache() if keeper is None else PrefixCache.on_disk())
        runner.keeper = keeper
        # A job of the server stopped just now, still ending, keeps the runner it began with.
        self.host.runner = runner
        self.host.capacity = options.capacity
        first = served_model(engine)
        worker = self._worker

        def served() -> ServedModel:
            # The pair loaded now: the window may load another while the server runs.
            now = worker.engine
            return served_model(now) if now is not None else first

        server = ApiServer(self.host, served, options)
        server.bind()
        address = server.start()
        self.server = server
        return address.base_url

    def stop(self) -> bool:
        """Close the port and cancel the jobs; True once the server ended."""
        server, self.server = self.server, None
        if server is None:
            return True
        return server.stop(timeout_s=5.0)
