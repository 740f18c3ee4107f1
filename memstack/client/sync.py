"""Client: a memstack service (``memstack serve``) with ``Memory``'s methods, over httpx.

    with Client("http://127.0.0.1:8000", api_key="key-acme") as memory:
        memory.add("我叫李四", user_id="u1", thread_id="s1")
        ctx = memory.context(user_id="u1", thread_id="s2", query="我叫什么？")

One ``httpx.Client`` holds the connections (pooled, kept alive) for the client's life; ``close``
(or ``with``) releases them. The methods are the steps of ``client.steps``, run by ``run``, which
sends, retries and pauses as ``client.transport`` says. Safe to share between threads, as httpx's client is.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar

from . import steps
from .connection import Connection
from .tools import ClientTools
from .transport import Action, Request, Step, Try, only

P = ParamSpec("P")
R = TypeVar("R")


def _blocking(step: Callable[P, Step[R]]) -> Callable[Concatenate[Client, P], R]:
    """The step as a method that runs it to its value."""

    @functools.wraps(step)
    def call(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.run(step(*args, **kwargs))

    return call


class Client(Connection):
    """A memstack service with ``Memory``'s methods (see ``client.steps`` for what differs).

    ``url``: the service (``http://host:8000``); ``api_key``: the tenant's key (default
    ``$MEMSTACK_API_KEY``; none for a server without keys); ``timeout``: seconds for each try
    (connect, read, write; None: no limit); ``retries``: how many more tries after a failed one
    that may be repeated (a ``Retries`` for the pauses too). ``transport``: an httpx transport
    (tests; a proxy). Constructing one connects to nothing.
    """

    HTTP = "Client"

    def run(self, step: Step[R]) -> R:
        """Run a step to its value: each request sent, tried again and paused between as
        ``transport.Exchange`` says."""
        exchange = self._exchange(step)
        while not exchange.done:
            exchange.resume(self._do(exchange.action))
        return exchange.value

    def _do(self, action: Action) -> Any:
        """Send a try (its response, or the transport error it raised), or pause."""
        if not isinstance(action, Try):
            time.sleep(action)
            return None
        try:
            return self._request(action)
        except self._broken as exc:
            return exc

    def send(self, request: Request) -> Any:
        """One request, tried again as ``retries`` allow; its JSON, or the library's error."""
        return self.run(only(request))

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
        return self.run(steps.tenant())

    def close(self) -> None:
        """Close the pooled connections."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
