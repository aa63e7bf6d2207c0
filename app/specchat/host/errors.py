"""Why a chat was not answered, as the API reports it: OpenAI's error shape and status."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A request the API answers with an error status.

    Attributes:
        status: the HTTP status.
        message: one line for people.
        kind: OpenAI's error `type` ("invalid_request_error", "server_error", ...).
        param: the request field at fault, or None.
        code: a machine-readable code ("context_length_exceeded"), or None.
        headers: extra response headers (Retry-After on a full queue).
    """

    def __init__(
        self,
        status: int,
        message: str,
        *,
        kind: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.param = param
        self.code = code
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.code,
            }
        }


def invalid(message: str, *, param: str | None = None, code: str | None = None) -> ApiError:
    """400: the request is malformed or asks for what cannot be done."""
    return ApiError(400, message, param=param, code=code)


def busy(retry_after_s: int) -> ApiError:
    return ApiError(
        503,
        "the server's queue is full; try again shortly",
        kind="server_error",
        code="queue_full",
        headers={"Retry-After": str(retry_after_s)},
    )


def client_gone() -> ApiError:
    """499 (nginx's "client closed request"): nobody reads it; it ends the request quietly."""
    return ApiError(499, "the client went away", kind="cancelled")


def engine_failed(message: str) -> ApiError:
    return ApiError(500, f"the engine failed: {message}", kind="server_error", code="engine_error")
