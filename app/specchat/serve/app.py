"""The HTTP routes: /v1/models, /v1/chat/completions (whole or streamed), /health."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator, Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from specchat.host.answer_format.reader import AnswerReader, Piece
from specchat.host.chat_call import ChatCall
from specchat.host.errors import ApiError
from specchat.host.jobs import Failed, Finished, Job, JobEvent, Round, Started
from specchat.serve import shaping
from specchat.serve.executor import Executor
from specchat.serve.guard import KeyGuard, ServeOptions, error_response, read_json
from specchat.serve.parsing import parse_chat_call

if TYPE_CHECKING:
    from specchat.engine.session import ChatEngine

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServedModel:
    """What the server answers with.

    Attributes:
        model_id: the name /v1/models lists and responses carry.
        modes: the drafting modes the loaded pair offers (auto, plain, its drafters).
        n_ctx: the context window, in tokens.
    """

    model_id: str
    modes: tuple[str, ...]
    n_ctx: int


class _Answer:
    """One job's events, handed from the engine thread to the event loop."""

    def __init__(self, call: ChatCall, label: str) -> None:
        loop = asyncio.get_running_loop()
        self.events: asyncio.Queue[JobEvent] = asyncio.Queue()

        def deliver(event: JobEvent) -> None:
            try:
                loop.call_soon_threadsafe(self.events.put_nowait, event)
            except RuntimeError:  # the loop closed: nobody is listening any more
                self.job.cancel.set()

        self.job = Job(call, deliver=deliver, label=label)

    async def next(self, receive: Receive | None = None) -> JobEvent:
        """The next event; with `receive`, a client that goes away meanwhile cancels the job
        (its answer then ends at the next round, with a last event as usual)."""
        if receive is None or self.job.cancel.is_set():
            return await self.events.get()
        getting = asyncio.ensure_future(self.events.get())
        listening = asyncio.ensure_future(_disconnected(receive))
        done, _ = await asyncio.wait({getting, listening}, return_when=asyncio.FIRST_COMPLETED)
        if listening in done:
            self.job.cancel.set()
            return await getting
        listening.cancel()
        return getting.result()


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class _EventStream(Response):
    """Server-sent events of one answer; a client that goes away cancels it."""

    def __init__(self, chunks: Callable[[Receive], AsyncIterator[bytes]], answer: _Answer) -> None:
        # No body and no Content-Length: the events are sent as they come.
        self.raw_headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"),
        ]
        self.status_code = 200
        self.background = None
        self._chunks = chunks
        self._answer = answer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        try:
            async for data in self._chunks(receive):
                await send({"type": "http.response.body", "body": data, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            self._answer.job.cancel.set()
        finally:
            self._answer.job.cancel.set()  # a no-op once the answer ended


def build_app(
    engine: Executor, served: Callable[[], ServedModel], options: ServeOptions
) -> Starlette:
    """The ASGI app over `engine`, whatever runs its jobs (started); `served` says what it
    answers as now (the window may load another pair while it serves)."""
    numbers = itertools.count(1)

    async def health(request: Request) -> Response:
        status = {"status": "ok", "model": served().model_id, "waiting": engine.waiting}
        return JSONResponse({**status, "busy": engine.running})

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [_model_entry(served().model_id)]})

    async def one_model(request: Request) -> Response:
        name = request.path_params["model"]
        if name != served().model_id:
            error = ApiError(404, f"no model {name!r} here", param="model", code="model_not_found")
            return error_response(error)
        return JSONResponse(_model_entry(name))

    async def chat(request: Request) -> Response:
        try:
            body = await read_json(request, limit=options.max_body_bytes)
            model = served()
            call = parse_chat_call(body, modes=model.modes, n_ctx=model.n_ctx)
        except ApiError as error:
            return error_response(error)
        client = request.client.host if request.client else "?"
        answer = _Answer(call, f"#{next(numbers)} from {client}")
        try:
            engine.submit(answer.job)
        except ApiError as error:
            return error_response(error)
        first = await answer.next(request.receive)
        if isinstance(first, Failed):
            return error_response(first.error)
        if not isinstance(first, Started):  # pragma: no cover - the engine's order
            raise RuntimeError(f"unexpected first event {first!r}")
        ident, created = shaping.completion_id(), shaping.now()
        if call.stream:
            started = first
            reader = started.tools.reader()
            return _EventStream(
                lambda receive: _stream(
                    answer, receive, call, model.model_id, ident, created, reader, started
                ),
                answer,
            )
        while True:
            event = await answer.next(request.receive)
            if isinstance(event, Finished):
                summary = event.summary
                return JSONResponse(
                    shaping.completion(summary, model=model.model_id, ident=ident, created=created)
                )
            if isinstance(event, Failed):
                return error_response(event.error)

    async def http_error(request: Request, error: Exception) -> Response:
        assert isinstance(error, HTTPException)
        return error_response(ApiError(error.status_code, str(error.detail), code=None))

    middleware = [Middleware(KeyGuard, api_key=options.api_key)]
    if options.cors:
        middleware.insert(
            0,
            Middleware(
                CORSMiddleware,
                allow_origins=list(options.cors),
                allow_methods=["GET", "POST", "OPTIONS"],
                allow_headers=["Authorization", "Content-Type"],
            ),
        )
    return Starlette(
        routes=[
            Route("/health", health, methods=["GET"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/v1/models/{model:path}", one_model, methods=["GET"]),
            Route("/v1/chat/completions", chat, methods=["POST"]),
        ],
        middleware=middleware,
        exception_handlers={HTTPException: http_error},
    )


async def _stream(
    answer: _Answer,
    receive: Receive,
    call: ChatCall,
    model: str,
    ident: str,
    created: int,
    reader: AnswerReader | None,
    started: Started,
) -> AsyncIterator[bytes]:
    def sse(delta: dict[str, Any]) -> bytes:
        return shaping.sse(shaping.chunk(ident, model, created, delta=delta))

    def split(pieces: list[Piece]) -> list[bytes]:
        return [sse(shaping.tool_delta(piece)) for piece in pieces]

    yield sse({"role": "assistant", "content": ""})
    if reader is not None:
        for data in split(reader.feed(started.tools.answer_prefix)):
            yield data
    while True:
        event = await answer.next(receive)
        if isinstance(event, Round):
            if not event.result.text:
                continue
            if reader is None:
                yield sse({"content": event.result.text})
                continue
            # Text that may open a call, or end the thinking, is held until it is known; a
            # call is sent as its name, then its arguments as they come.
            for data in split(reader.feed(event.result.text)):
                yield data
        elif isinstance(event, Finished):
            if reader is not None:
                for data in split(reader.finish()):
                    yield data
            yield shaping.sse(shaping.final_chunk(event.summary, ident, model, created))
            if call.include_usage:
                yield shaping.sse(shaping.usage_chunk(event.summary, ident, model, created))
            yield shaping.sse("[DONE]")
            return
        elif isinstance(event, Failed):
            # The status was sent already: the error goes in the stream, as OpenAI's does.
            yield shaping.sse(event.error.body())
            return


def _model_entry(model_id: str) -> dict[str, Any]:
    return {"id": model_id, "object": "model", "created": 0, "owned_by": "specchat"}


def served_model(engine: ChatEngine) -> ServedModel:
    """What a loaded pair is served as: the target file's name, its modes, its context."""
    names: Collection[str] = engine.decoder.drafters.names()
    modes = ("auto", *names, "plain")
    return ServedModel(Path(engine.target.path).stem, modes, engine.target.n_ctx)
