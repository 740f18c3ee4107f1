"""AsyncClient: ``Client``'s methods as coroutines, over ``httpx.AsyncClient``, for asyncio apps.

    async with AsyncClient("http://127.0.0.1:8000", api_key="key-acme") as memory:
        await memory.add("我叫李四", user_id="u1", thread_id="s1")
        ctx = await memory.context(user_id="u1", thread_id="s2", query="我叫什么？")

The same steps (``client.steps``) and retry policy (``client.transport``) as ``Client``; only the
sending and the pauses are awaited. ``export`` is an async iterator, as ``AsyncMemory``'s is.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

from . import steps
from .connection import Connection
from .tools import AsyncClientTools
from .transport import Action, Request, Step, Try, only

P = ParamSpec("P")
R = TypeVar("R")


def _awaited(step: Callable[P, Step[R]]) -> Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, R]]:
    """The step as a coroutine method that runs it to its value."""

    @functools.wraps(step)
    async def call(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self.run(step(*args, **kwargs))

    return call


class AsyncClient(Connection):
    """``Client`` for asyncio: the same arguments, the same methods, awaited."""

    HTTP = "AsyncClient"

    async def run(self, step: Step[R]) -> R:
        """Run a step to its value (``Client.run``, awaited)."""
        exchange = self._exchange(step)
        while not exchange.done:
            exchange.resume(await self._do(exchange.action))
        return exchange.value

    async def _do(self, action: Action) -> Any:
        """Send a try (its response, or the transport error it raised), or pause."""
        if not isinstance(action, Try):
            await asyncio.sleep(action)
            return None
        try:
            return await self._request(action)
        except self._broken as exc:
            return exc

    async def send(self, request: Request) -> Any:
        """One request, tried again as ``retries`` allow; its JSON, or the library's error."""
        return await self.run(only(request))

    # ---- Memory's methods, and the REST API's others (client.steps) ----------------------------

    add = _awaited(steps.add)
    history = _awaited(steps.history)
    threads = _awaited(steps.threads)
    context = _awaited(steps.context)
    search = _awaited(steps.search)
    memories = _awaited(steps.memories)
    delete_memory = _awaited(steps.delete_memory)
    get_state = _awaited(steps.get_state)
    set_state = _awaited(steps.set_state)
    set_attribute = _awaited(steps.set_attribute)
    delete_attribute = _awaited(steps.delete_attribute)
    edit_note = _awaited(steps.edit_note)
    delete_note = _awaited(steps.delete_note)
    audit = _awaited(steps.audit)
    usage = _awaited(steps.usage)
    forget = _awaited(steps.forget)
    forget_saved = _awaited(steps.forget_saved)
    import_ = _awaited(steps.import_)
    pending = _awaited(steps.pending)
    flush = _awaited(steps.flush)
    deletions = _awaited(steps.deletions)
    retention = _awaited(steps.retention)
    tenant_usage = _awaited(steps.tenant_usage)
    openai_tools = _awaited(steps.openai_tools)
    call_tool = _awaited(steps.call_tool)
    health = _awaited(steps.health)

    async def export(self, *, user_id: str, tenant: str | None = None) -> AsyncIterator[dict[str, Any]]:
        """``Client.export`` as an async iterator (the records arrive in one answer)."""
        for record in await self.run(steps.export(user_id=user_id, tenant=tenant)):
            yield record

    def tools(self, user_id: str, thread_id: str | None = None, *, form: str = "notes") -> AsyncClientTools:
        """The memory tools bound to a user (and thread): ``memory_tools(memory, user_id, thread_id, form=)``'s
        ``openai_tools()`` and ``call(name, arguments)``, run by the server."""
        return AsyncClientTools(self, user_id, thread_id, form=form)

    async def tenant(self) -> str:
        """The tenant the API key names (asked of the service once)."""
        return await self.run(steps.tenant())

    async def close(self) -> None:
        """Close the pooled connections."""
        await self._http.aclose()

    aclose = close

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
