"""Every failure as one JSON shape, ``{"error": {"code", "message", "field"}}``, with an HTTP status.

The code is the error tree's stable ``code``; the status says whose fault it is:

    InvalidInput, BudgetError, UnknownName, request validation   422  (the field is named)
    a body that is not JSON (bad UTF-8, a 5000-digit number)     422  (field "body")
    NotFound (an edit naming what is not there)                404
    Conflict (it changed since it was read: read it again)     409
    other UsageError                                           400
    ApiError (401 unauthorized, 404 user/thread/record not found, 413 body too large, ...)
    a user past the tenant's answer budget (proxy.over_budget)  429  (with Retry-After)
    ProviderRejected, ProviderUnavailable, ModelOutputError    502  (the upstream model failed)
    UpstreamTimeout                                            504
    StoreError                                                 503
    MissingDependency                                          501
    any other error                                            500  (code "internal_error")
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import (
    BudgetError,
    Conflict,
    InvalidInput,
    MemstackError,
    MissingDependency,
    ModelOutputError,
    NotFound,
    ProviderRejected,
    ProviderUnavailable,
    StoreError,
    UnknownName,
    UsageError,
)

log = logging.getLogger("memstack.server")


class ApiError(Exception):
    """An HTTP-level refusal that the library has no error for (unauthorized, not found, too large)."""

    def __init__(self, status: int, code: str, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.field = field


class UpstreamTimeout(ProviderUnavailable):
    """The upstream model did not answer within the configured timeout."""

    code = "upstream_timeout"


#: most specific first: the first class an error is an instance of gives its status
STATUS: tuple[tuple[type[MemstackError], int], ...] = (
    (UpstreamTimeout, 504),
    (NotFound, 404),
    (Conflict, 409),
    (InvalidInput, 422),
    (BudgetError, 422),
    (UnknownName, 422),
    (MissingDependency, 501),
    (ProviderRejected, 502),
    (UsageError, 400),
    (ProviderUnavailable, 502),
    (ModelOutputError, 502),
    (StoreError, 503),
)

#: codes for the statuses Starlette raises itself (unknown route, wrong method, ...)
HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    413: "body_too_large",
    415: "unsupported_media_type",
}


def error_body(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "field": field}}


def error_response(status: int, code: str, message: str, field: str | None = None, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(code, message, field), status_code=status, headers=headers)


def status_of(exc: MemstackError) -> int:
    return next((status for cls, status in STATUS if isinstance(exc, cls)), 500)


def field_of(loc: tuple[Any, ...] | list[Any], inner: str | None = None) -> str:
    """("body", "messages", 0, "role") -> "messages[0].role"; ("query", "k") -> "k". ``inner``: the
    field within the item at ``loc`` that the library named ("content" of messages[0]), so an
    error in an item of a list names its whole path, "messages[0].content", never a bare "content"."""
    out = ""
    for part in [*(list(loc)[1:] if loc and loc[0] in ("body", "query", "path", "header") else loc), *([inner] if inner else [])]:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "body"


def _library_field(error: dict[str, Any]) -> str | None:
    """The field an InvalidInput raised by a schema's validator names (the library's own check of
    an item, e.g. a message's empty content), or None."""
    cause = (error.get("ctx") or {}).get("error")
    return cause.field if isinstance(cause, InvalidInput) else None


def _library_code(error: dict[str, Any]) -> str:
    """The code of the library's error behind a schema's validator (``unknown_name`` for an
    unknown layer in a strategy, as ``Memory.context`` raises it), else ``invalid_input``."""
    cause = (error.get("ctx") or {}).get("error")
    library = cause if isinstance(cause, MemstackError) else getattr(cause, "__cause__", None)
    return library.code if isinstance(library, (BudgetError, UnknownName)) else InvalidInput.code


def body_error(exc: StarletteHTTPException) -> str | None:
    """Why a JSON body could not be read, for the 400 FastAPI raises when decoding it fails other
    than as malformed JSON (which is a 422 already): bytes that are not UTF-8, a number of more
    digits than Python converts, arrays nested past the parser's recursion; else None. Those are
    invalid input like any other: 422 ``invalid_input``, field ``body``."""
    cause = exc.__cause__
    if exc.status_code != 400 or cause is None:
        return None
    if isinstance(cause, UnicodeDecodeError):
        return f"not valid UTF-8 (byte {cause.start})"
    if isinstance(cause, RecursionError):
        return "JSON nested too deep"
    if isinstance(cause, ValueError):
        return f"not valid JSON: {cause}"
    return None


def install(app: FastAPI) -> None:
    """Register the handlers that turn every exception into the JSON error shape."""

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return error_response(exc.status, exc.code, str(exc), exc.field, headers)

    @app.exception_handler(MemstackError)
    async def memstack_error(request: Request, exc: MemstackError) -> JSONResponse:
        status = status_of(exc)
        if status >= 500:
            log.warning("%s %s failed: %s: %s", request.method, request.url.path, type(exc).__name__, exc)
        return error_response(status, exc.code, str(exc), getattr(exc, "field", None))

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        first = errors[0] if errors else {"loc": ("body",), "msg": "invalid request"}
        inner = _library_field(first)
        field = "body" if first.get("type") == "json_invalid" else field_of(first.get("loc", ()), inner)
        message = str(first.get("msg", "invalid")).removeprefix("Value error, ").removeprefix(f"{inner}: " if inner else "")
        return error_response(422, _library_code(first), f"{field}: {message}", field)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        unreadable = body_error(exc)
        if unreadable is not None:
            return error_response(422, InvalidInput.code, f"body: {unreadable}", "body")
        code = HTTP_CODES.get(exc.status_code, f"http_{exc.status_code}")
        return error_response(exc.status_code, code, str(exc.detail), None, dict(exc.headers or {}) or None)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("%s %s: unexpected error", request.method, request.url.path)
        return error_response(500, "internal_error", f"internal error: {type(exc).__name__}")
