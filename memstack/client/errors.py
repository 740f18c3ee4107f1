"""The service's error JSON, and a failed connection, as the library's own error tree.

The server answers every failure as ``{"error": {"code", "message", "field"}}`` with a status
(``memstack.server.errors``); the client raises the error class of that ``code`` from
``memstack.errors`` (the tree is walked, so a class added there is known here), with the server's
message and ``field``, so that code written against ``Memory`` handles a ``Client``'s errors
unchanged: an ``InvalidInput`` naming ``messages[0].content``, a ``NotFound``, a ``Conflict``.

Codes that name no class of the tree are the HTTP layer's own:

    user_not_found, thread_not_found, record_not_found, not_found   NotFound (with the field)
    unauthorized (401)                                              Unauthorized
    body_too_large (413)                                            InvalidInput, field "body"
    request_timeout (408)                                           Unavailable
    another 4xx                                                     UsageError
    503                                                             StoreError
    502, 504 (the proxy's upstream model)                           ProviderUnavailable
    another 5xx (internal_error)                                    RuntimeFailure

The instance keeps the server's ``code`` (``exc.code == "thread_not_found"``) and the HTTP
``status``. A connection refused, reset or timed out (after the client's retries) is
``Unavailable``, a ``StoreError``: to a client the service is its store.
"""

from __future__ import annotations

from typing import Any

from .. import errors
from ..profile import ProfileMismatch

#: the HTTP layer's codes that the error tree has no class of its own for
HTTP_CODES: dict[str, type[errors.MemstackError]] = {
    "user_not_found": errors.NotFound,
    "thread_not_found": errors.NotFound,
    "record_not_found": errors.NotFound,
    "not_found": errors.NotFound,
    "unauthorized": errors.Unauthorized,
    "body_too_large": errors.InvalidInput,
    "request_timeout": errors.Unavailable,
}


def _tree(cls: type[errors.MemstackError]) -> dict[str, type[errors.MemstackError]]:
    """Every class under ``cls`` by its code (a subclass that keeps its parent's code: the parent)."""
    out: dict[str, type[errors.MemstackError]] = {}
    for sub in cls.__subclasses__():
        for code, found in _tree(sub).items():
            out.setdefault(code, found)
        out.setdefault(sub.code, sub)
    return out


def classes() -> dict[str, type[errors.MemstackError]]:
    """The error class of every code the server may answer."""
    known: dict[str, type[errors.MemstackError]] = {errors.MemstackError.code: errors.MemstackError, **_tree(errors.MemstackError)}
    return {**known, ProfileMismatch.code: ProfileMismatch, **HTTP_CODES}


_CLASSES = classes()


def by_status(status: int) -> type[errors.MemstackError]:
    """The class of an error whose code the client does not know, by its status."""
    if status in (502, 504):
        return errors.ProviderUnavailable
    if status == 503:
        return errors.StoreError
    if status == 401:
        return errors.Unauthorized
    if status == 404:
        return errors.NotFound
    if status == 409:
        return errors.Conflict
    if status == 422:
        return errors.InvalidInput
    return errors.UsageError if 400 <= status < 500 else errors.RuntimeFailure


def error_from(status: int, body: Any) -> errors.MemstackError:
    """The library error for a response of ``status`` whose JSON body is ``body`` (anything: a
    proxy in between may answer HTML)."""
    detail = body.get("error") if isinstance(body, dict) else None
    if not isinstance(detail, dict):
        return make(by_status(status), f"HTTP {status}: {str(body)[:200] or 'no body'}", code=None, field=None, status=status)
    code = detail.get("code") if isinstance(detail.get("code"), str) else None
    message = str(detail.get("message") or f"HTTP {status}")
    field = detail.get("field") if isinstance(detail.get("field"), str) else None
    if code == "body_too_large" and field is None:
        field = "body"
    cls = _CLASSES.get(code or "") or by_status(status)
    return make(cls, message, code=code, field=field, status=status)


def make(cls: type[errors.MemstackError], message: str, *, code: str | None, field: str | None, status: int | None) -> errors.MemstackError:
    """An instance of ``cls`` with the server's message, without its own constructor (some take
    other arguments: ``MissingDependency(package, extra)``), and the attributes its handlers read."""
    exc = cls.__new__(cls)
    Exception.__init__(exc, message)
    exc.field = field  # type: ignore[attr-defined]
    exc.status = status  # type: ignore[attr-defined]
    if code is not None:
        exc.code = code
    if isinstance(exc, errors.ModelOutputError):
        exc.raw = ""
    if isinstance(exc, errors.MissingAPIKey):
        exc.env = None
    if isinstance(exc, errors.MissingDependency):
        exc.install = ""
    return exc


#: httpx's errors of a connection that was never made: the request was not sent
NOT_SENT = frozenset({"ConnectError", "ConnectTimeout", "PoolTimeout", "UnsupportedProtocol"})


def unavailable(url: str, cause: BaseException, tries: int) -> errors.Unavailable:
    """``Unavailable`` for a request that got no answer (``tries`` times): whether it was sent at
    all, so that the caller of a request that is not repeated knows it may have been carried out."""
    name = type(cause).__name__
    if name in NOT_SENT:
        what = f"could not be reached ({name}: {cause})"
    elif "Timeout" in name:
        what = "did not answer in time (the request may have been carried out)"
    else:
        what = f"broke the connection before answering ({name}: {cause}; the request may have been carried out)"
    return errors.Unavailable(f"the memstack service at {url} {what}" + (f", {tries} tries" if tries > 1 else ""))
