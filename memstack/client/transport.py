"""What one request to the service is, and when a failed try is tried again: sans-IO, shared by
the blocking and the asyncio client (which only send and sleep as an ``Exchange`` says).

A method of the client is a *step*: a generator that yields ``Request``s and gets back each
answer's JSON (or has the mapped error thrown into it), and returns the method's value. Each
client runs steps with its own httpx client (connection pooling, timeouts); nothing here does I/O.

Retries (``Retries``): a try that failed is tried again, after a growing pause, when repeating it
cannot do twice what the first did:

- the connection could not be made (refused, DNS, a connect timeout, the pool full): nothing was
  sent, any request is tried again;
- the connection broke or timed out after the request was sent, or the answer was a 503 (the
  store was unreachable: nothing was committed), 502 or 504: only an *idempotent* request: GET,
  PUT, DELETE, the reads sent as POST (context, search), an import (importing twice adds nothing),
  and an add, which carries an ``Idempotency-Key`` made once per call and sent on every try, so
  the server stores it once and answers a retry with what it stored (``server.idempotency``).

Every other failure is the service's answer, raised as the library's error (``client.errors``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ..errors import InvalidInput, MemstackError
from .errors import NOT_SENT, error_from, unavailable

R = TypeVar("R")

IDEMPOTENT_METHODS = frozenset({"GET", "PUT", "DELETE", "HEAD"})
#: answers after which an idempotent request is tried again (the store, or a gateway, failed)
RETRY_STATUSES = frozenset({502, 503, 504})


@dataclass(frozen=True)
class Request:
    """One HTTP request of a step. ``safe``: repeating it changes nothing more (a POST that only
    reads, an import); ``keyed``: an add, sent with an ``Idempotency-Key``; ``cached``: its answer
    does not change for the client's life (the tenant), asked once."""

    method: str
    path: str
    params: Mapping[str, Any] = field(default_factory=dict)
    json: Any = None
    safe: bool = False
    keyed: bool = False
    cached: bool = False

    def body(self) -> bytes | None:
        """The JSON body as UTF-8: InvalidInput (field "body") for what JSON cannot carry (NaN, an
        infinity, a lone surrogate), refused here as the library refuses it, before any I/O."""
        if self.json is None:
            return None
        try:
            return json.dumps(self.json, ensure_ascii=False, allow_nan=False).encode("utf-8")
        except (ValueError, TypeError) as exc:
            raise InvalidInput(f"the request cannot be sent as JSON: {exc}", field="body") from None

    @property
    def idempotent(self) -> bool:
        return self.method in IDEMPOTENT_METHODS or self.safe or self.keyed

    def headers(self, key: str | None) -> dict[str, str]:
        out = {"Idempotency-Key": key} if key is not None else {}
        return {**out, "Content-Type": "application/json"} if self.json is not None else out

    def query(self) -> dict[str, Any]:
        """The query parameters that are set (None: left out)."""
        return {k: v for k, v in self.params.items() if v is not None}


#: a client method's sans-IO body: yields requests, is sent their JSON answers, returns the value
Step = Generator[Request, Any, R]


def idempotency_key(request: Request) -> str | None:
    """A new key for a keyed request (one per call, the same on every try), else None."""
    return f"memstack-client-{uuid.uuid4().hex}" if request.keyed else None


@dataclass(frozen=True)
class Retries:
    """How often and after which pauses a failed try is tried again: ``attempts`` more tries
    (0: none), the first after ``backoff`` seconds, each pause doubled up to ``max_backoff``."""

    attempts: int = 3
    backoff: float = 0.2
    max_backoff: float = 2.0

    def __post_init__(self) -> None:
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int) or self.attempts < 0:
            raise InvalidInput("retries must be a whole number of at least 0", field="retries")

    def pauses(self) -> Iterator[float]:
        """The pause before each further try."""
        pause = self.backoff
        for _ in range(self.attempts):
            yield pause
            pause = min(pause * 2, self.max_backoff)

    @staticmethod
    def after_error(request: Request, exc: BaseException) -> bool:
        """Whether a try that raised ``exc`` (an httpx transport error) may be tried again."""
        return type(exc).__name__ in NOT_SENT or request.idempotent

    @staticmethod
    def after_status(request: Request, status: int) -> bool:
        """Whether a try answered with ``status`` may be tried again."""
        return status in RETRY_STATUSES and request.idempotent


#: the response header of an answer the server replayed for a retried Idempotency-Key
REPLAYED = "idempotent-replayed"


@dataclass(frozen=True)
class Keyed:
    """What a keyed request's step is sent: the answer, and whether the server had stored its
    messages before this call (``stale``: a replay on the first try, the messages' ids being in
    the thread already; ``Memory.add`` answers [] for them). A replay after a retry is this call's
    own first try, answered again."""

    answer: Any
    stale: bool


def keyed(request: Request, result: Any, replayed: bool, tries: int) -> Any:
    """The value a step is sent for ``result``: a ``Keyed`` for a keyed request, else the JSON."""
    return Keyed(result, replayed and tries == 1) if request.keyed else result


def answer(status: int, body: bytes, content_type: str) -> Any:
    """The JSON of a successful answer, or the library error of a failed one (raised)."""
    parsed: Any = None
    if body and "json" in content_type:
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = body.decode("utf-8", "replace")
    elif body:
        parsed = body.decode("utf-8", "replace")
    if status >= 400:
        raise error_from(status, parsed)
    return parsed


@dataclass(frozen=True)
class Try:
    """One try of a request, as the HTTP client sends it (the same body and key on every try)."""

    method: str
    path: str
    params: dict[str, Any]
    content: bytes | None
    headers: dict[str, str]


#: what a client does next: send a try, or pause that many seconds
Action = Try | float


class Exchange(Generic[R]):
    """A step run to its value, sans-IO: ``action`` is what the client does next (send a ``Try``,
    or pause), and ``resume(outcome)`` says how it went: a try's httpx response or the transport
    error it raised, None after a pause. ``value`` once ``done``. Each of the step's requests is
    tried as ``retries`` allow; an error (the answer's, a failed connection's) is thrown into the
    step, which may handle it (``forget`` of what is not there: 0). ``cache``: the answers of
    ``cached`` requests, asked once per client."""

    def __init__(self, step: Step[R], retries: Retries, url: str, cache: dict[tuple[str, str], Any]) -> None:
        self._actions = _actions(step, retries, url, cache)
        self.done = False
        self.value: R
        self._advance(lambda: next(self._actions))

    def resume(self, outcome: Any) -> None:
        if isinstance(outcome, BaseException):
            self._advance(lambda: self._actions.throw(outcome))
        else:
            self._advance(lambda: self._actions.send(outcome))

    def _advance(self, go: Callable[[], Action]) -> None:
        try:
            self.action = go()
        except StopIteration as stop:
            self.done, self.value = True, stop.value


def _actions(step: Step[R], retries: Retries, url: str, cache: dict[tuple[str, str], Any]) -> Generator[Action, Any, R]:
    try:
        request = next(step)
        while True:
            try:
                result = yield from _tries(request, retries, url, cache)
            except MemstackError as exc:
                request = step.throw(exc)
            else:
                request = step.send(result)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


def _tries(request: Request, retries: Retries, url: str, cache: dict[tuple[str, str], Any]) -> Generator[Action, Any, Any]:
    """One request, tried again as ``retries`` allow: what its step is sent (``keyed``), or the
    library's error raised."""
    if request.cached and (request.method, request.path) in cache:
        return cache[(request.method, request.path)]
    key, body = idempotency_key(request), request.body()
    attempt = Try(request.method, request.path, request.query(), body, request.headers(key))
    pauses = retries.pauses()
    tries = 0
    while True:
        tries += 1
        try:
            response = yield attempt
        except Exception as exc:  # the transport error the client's try raised
            pause = next(pauses, None) if retries.after_error(request, exc) else None
            if pause is None:
                raise unavailable(url, exc, tries) from exc
            yield pause
            continue
        if retries.after_status(request, response.status_code) and (pause := next(pauses, None)) is not None:
            yield pause
            continue
        result = answer(response.status_code, response.content, response.headers.get("content-type", ""))
        if request.cached:
            cache[(request.method, request.path)] = result
        return keyed(request, result, response.headers.get(REPLAYED) == "true", tries)


def only(request: Request) -> Step[Any]:
    """The step of one request: its answer."""
    return (yield request)
