"""Client: a memstack service (``memstack serve``) with ``Memory``'s methods, over httpx.

    with Client("http://127.0.0.1:8000", api_key="key-acme") as memory:
        memory.add("我叫李四", user_id="u1", thread_id="s1")
        ctx = memory.context(user_id="u1", thread_id="s2", query="我叫什么？")

One ``httpx.Client`` holds the connections (pooled, kept alive) for the client's life; ``close``
(or ``with``) releases them. The methods are the steps of ``client.steps``, run by ``send``, which
retries as ``client.transport`` says. Safe to share between threads, as httpx's client is.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

from ..errors import InvalidInput, require
from . import steps
from .errors import unavailable
from .tools import ClientTools
from .transport import REPLAYED, Request, Retries, Step, answer, idempotency_key, keyed, run_step

P = ParamSpec("P")
R = TypeVar("R")

#: the environment variable an API key is read from when none is given
KEY_ENV = "MEMSTACK_API_KEY"
DEFAULT_TIMEOUT = 30.0


def _blocking(step: Callable[P, Step[R]]) -> Callable[Concatenate[Client, P], R]:
    """The step as a method that runs it to its value."""

    @functools.wraps(step)
    def call(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return run_step(step(*args, **kwargs), self.send)

    return call


def options(url: str, api_key: str | None, timeout: float | None, retries: int | Retries) -> tuple[str, dict[str, str], Retries]:
    """The base URL, the headers and the retry policy of a client, checked (shared with AsyncClient)."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise InvalidInput(f"a memstack service URL starts with http:// or https://, not {url!r}", field="url")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        raise InvalidInput("timeout must be a number of seconds above 0, or None", field="timeout")
    key = api_key if api_key is not None else os.environ.get(KEY_ENV) or None
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return url.rstrip("/"), headers, retries if isinstance(retries, Retries) else Retries(attempts=retries)


class Client:
    """A memstack service with ``Memory``'s methods (see ``client.steps`` for what differs).

    ``url``: the service (``http://host:8000``); ``api_key``: the tenant's key (default
    ``$MEMSTACK_API_KEY``; none for a server without keys); ``timeout``: seconds for each try
    (connect, read, write; None: no limit); ``retries``: how many more tries after a failed one
    that may be repeated (a ``Retries`` for the pauses too). ``transport``: an httpx transport
    (tests; a proxy). Constructing one connects to nothing.
    """

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        retries: int | Retries = 3,
        transport: Any = None,
    ) -> None:
        httpx = require("httpx", extra="client")
        self.url, headers, self.retries = options(url, api_key, timeout, retries)
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout, transport=transport)
        self._broken: type[Exception] = httpx.TransportError
        self._cache: dict[tuple[str, str], Any] = {}

    def send(self, request: Request) -> Any:
        """One request, tried again as ``retries`` allow; its JSON, or the library's error."""
        if request.cached and (request.method, request.path) in self._cache:
            return self._cache[(request.method, request.path)]
        key, body = idempotency_key(request), request.body()
        pauses = self.retries.pauses()
        tries = 0
        while True:
            tries += 1
            try:
                response = self._http.request(
                    request.method, request.path, params=request.query(), content=body, headers=request.headers(key)
                )
            except self._broken as exc:
                pause = next(pauses, None) if self.retries.after_error(request, exc) else None
                if pause is None:
                    raise unavailable(self.url, exc, tries) from exc
                time.sleep(pause)
                continue
            if self.retries.after_status(request, response.status_code) and (pause := next(pauses, None)) is not None:
                time.sleep(pause)
                continue
            result = answer(response.status_code, response.content, response.headers.get("content-type", ""))
            if request.cached:
                self._cache[(request.method, request.path)] = result
            return keyed(request, result, response.headers.get(REPLAYED) == "true", tries)

    # ---- Memory's methods, and the REST API's others (client.steps) ----------------------------

    add = _blocking(steps.add)
    history = _blocking(steps.history)
    threads = _blocking(steps.threads)
    context = _blocking(steps.context)
    search = _blocking(steps.search)
    memories = _blocking(steps.memories)
    delete_memory = _blocking(steps.delete_memory)
    get_state = _blocking(steps.get_state)
    set_state = _blocking(steps.set_state)
    set_attribute = _blocking(steps.set_attribute)
    delete_attribute = _blocking(steps.delete_attribute)
    edit_note = _blocking(steps.edit_note)
    delete_note = _blocking(steps.delete_note)
    audit = _blocking(steps.audit)
    usage = _blocking(steps.usage)
    forget = _blocking(steps.forget)
    forget_saved = _blocking(steps.forget_saved)
    export = _blocking(steps.export)
    import_ = _blocking(steps.import_)
    pending = _blocking(steps.pending)
    flush = _blocking(steps.flush)
    deletions = _blocking(steps.deletions)
    retention = _blocking(steps.retention)
    tenant_usage = _blocking(steps.tenant_usage)
    openai_tools = _blocking(steps.openai_tools)
    call_tool = _blocking(steps.call_tool)
    health = _blocking(steps.health)

    def tools(self, user_id: str, thread_id: str | None = None, *, form: str = "notes") -> ClientTools:
        """The memory tools bound to a user (and thread): ``memory_tools(memory, user_id, thread_id, form=)``'s
        ``openai_tools()`` and ``call(name, arguments)``, run by the server."""
        return ClientTools(self, user_id, thread_id, form=form)

    @property
    def tenant(self) -> str:
        """The tenant the API key names (asked of the service once)."""
        return run_step(steps.tenant(), self.send)

    def close(self) -> None:
        """Close the pooled connections."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self.url!r})"
