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

from ..errors import MemstackError, require
from . import steps
from .errors import unavailable
from .sync import DEFAULT_TIMEOUT, options
from .tools import AsyncClientTools
from .transport import REPLAYED, Request, Retries, Step, answer, idempotency_key, keyed

P = ParamSpec("P")
R = TypeVar("R")


def _awaited(step: Callable[P, Step[R]]) -> Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, R]]:
    """The step as a coroutine method that runs it to its value."""

    @functools.wraps(step)
    async def call(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self.run(step(*args, **kwargs))

    return call


class AsyncClient:
    """``Client`` for asyncio: the same arguments, the same methods, awaited."""

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
        self._http = httpx.AsyncClient(base_url=self.url, headers=headers, timeout=timeout, transport=transport)
        self._broken: type[Exception] = httpx.TransportError
        self._cache: dict[tuple[str, str], Any] = {}

    async def run(self, step: Step[R]) -> R:
        """Run a step to its value (``transport.run_step``, awaited)."""
        try:
            request = next(step)
            while True:
                try:
                    result = await self.send(request)
                except MemstackError as exc:
                    request = step.throw(exc)
                else:
                    request = step.send(result)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    async def send(self, request: Request) -> Any:
        """One request, tried again as ``retries`` allow; its JSON, or the library's error."""
        if request.cached and (request.method, request.path) in self._cache:
            return self._cache[(request.method, request.path)]
        key, body = idempotency_key(request), request.body()
        pauses = self.retries.pauses()
        tries = 0
        while True:
            tries += 1
            try:
                response = await self._http.request(
                    request.method, request.path, params=request.query(), content=body, headers=request.headers(key)
                )
            except self._broken as exc:
                pause = next(pauses, None) if self.retries.after_error(request, exc) else None
                if pause is None:
                    raise unavailable(self.url, exc, tries) from exc
                await asyncio.sleep(pause)
                continue
            if self.retries.after_status(request, response.status_code) and (pause := next(pauses, None)) is not None:
                await asyncio.sleep(pause)
                continue
            result = answer(response.status_code, response.content, response.headers.get("content-type", ""))
            if request.cached:
                self._cache[(request.method, request.path)] = result
            return keyed(request, result, response.headers.get(REPLAYED) == "true", tries)

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

    def __repr__(self) -> str:
        return f"AsyncClient({self.url!r})"
