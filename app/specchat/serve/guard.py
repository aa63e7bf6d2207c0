"""What the server refuses before a request reaches the engine: a wrong or missing key, a
body over the limit, and an address other than this machine's without a key."""

from __future__ import annotations

import hmac
import ipaddress
import json
from dataclasses import dataclass

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from specchat.host.errors import ApiError, client_gone, invalid

#: The largest request body read (an editor's whole file and its chat fit many times).
MAX_BODY_BYTES = 8 << 20
#: Paths anyone may ask without the key (a load balancer's or an editor's probe).
OPEN_PATHS = ("/health",)


def unauthorized() -> ApiError:
    """401: the key is wrong or missing."""
    return ApiError(
        401,
        "Incorrect or missing API key: send it as 'Authorization: Bearer <key>'",
        kind="authentication_error",
        code="invalid_api_key",
    )


def too_large(limit: int) -> ApiError:
    """413: the body is over the limit read."""
    return ApiError(
        413,
        f"the request body is over {limit:,} bytes",
        code="request_too_large",
    )


@dataclass(frozen=True)
class ServeOptions:
    """How the server listens and what it allows.

    Attributes:
        host: the address bound (127.0.0.1 unless asked otherwise).
        port: the port (0: any free one).
        api_key: the key clients must send, or "" for none (loopback only).
        cors: origins a browser page may call from (none unless given).
        max_body_bytes: the largest request body read.
        capacity: requests that may wait behind the one being answered.
    """

    host: str = "127.0.0.1"
    port: int = 8080
    api_key: str = ""
    cors: tuple[str, ...] = ()
    max_body_bytes: int = MAX_BODY_BYTES
    capacity: int = 8


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_options(
    options: ServeOptions, *, key_from: str = "--api-key KEY", port_from: str = "--port"
) -> None:
    """Refuses options that would expose the models; raises ValueError with the reason.
    `key_from` and `port_from` name where a person sets them (the CLI's options, or the
    window's settings)."""
    if not is_loopback(options.host) and not options.api_key:
        raise ValueError(
            f"binding {options.host} lets other machines use the models: give {key_from}, "
            "which clients send as their API key, or keep the default 127.0.0.1"
        )
    if not 0 <= options.port <= 65535:
        raise ValueError(f"{port_from} must be between 0 and 65535 (got {options.port})")
    if options.capacity < 0:
        raise ValueError("the queue's capacity cannot be negative")


def error_response(error: ApiError) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers)


class KeyGuard:
    """ASGI middleware: every path but OPEN_PATHS needs `Authorization: Bearer <key>`."""

    def __init__(self, app: ASGIApp, *, api_key: str) -> None:
        self.app = app
        self._key = api_key.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self._key and scope["path"] not in OPEN_PATHS:
            headers = dict(scope.get("headers") or [])
            given = headers.get(b"authorization", b"")
            scheme, _, token = given.partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(token.strip(), self._key):
                await error_response(unauthorized())(scope, receive, send)
                return
        await self.app(scope, receive, send)


async def read_json(request: Request, *, limit: int) -> object:
    """The request's JSON body, read no further than `limit` bytes; ApiError otherwise.

    A body over the limit is refused from its Content-Length before a byte of it is read,
    and a chunked one as soon as what came exceeds it. Once the answer is sent uvicorn
    reads and drops the rest of the body (for as long as the connection's keep-alive
    allows), so a client still sending reads the 413 rather than a reset connection: an
    answer with `Connection: close` would lose it (tests/serve/test_client_mistakes.py).
    """
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large(limit)
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise too_large(limit)
            chunks.append(chunk)
    except ClientDisconnect:
        # A client that leaves mid-body is no fault of the server's: no traceback.
        raise client_gone() from None
    data = b"".join(chunks)
    if not data.strip():
        raise invalid("the request has no body; send a JSON object")
    try:
        return json.loads(data)
    except UnicodeDecodeError:
        raise invalid("the request body is not UTF-8 text") from None
    except RecursionError:
        raise invalid("the request body's JSON is nested too deeply") from None
    except json.JSONDecodeError as error:
        raise invalid(
            f"the request body is not valid JSON: {error.msg} at line {error.lineno} "
            f"column {error.colno}"
        ) from None
    except ValueError:  # the one other refusal: an integer over Python's 4,300-digit cap
        raise invalid("the request body's JSON holds a number too long to read") from None
