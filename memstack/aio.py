"""AsyncMemory: Memory's methods as coroutines, for asyncio apps (FastAPI, an agent loop).

One ``Memory`` does the work (validation, the memory profile, the layers, the token budget: the
same code, so the same results); ``AsyncMemory`` decides where its blocking parts run, and the
event loop never waits on them:

- the history's calls on the request path, in ``add``, ``history``, ``threads`` and ``pending``,
  await the backend's native async I/O where it has one (PostgreSQL: psycopg's
  ``AsyncConnectionPool`` with the store's own statements, ``backends.pg_async``);
- everything else, and those calls on the other backends (SQLite, ``memory://``, JSON lines),
  runs in a bounded executor: a thread pool of at most ``max_threads`` threads (default
  ``DEFAULT_THREADS``), this AsyncMemory's own. Calls beyond that wait in its queue without
  holding a thread. ``context`` and ``search`` count tokens, embed and read several stores: CPU
  work that would stall the loop, so it runs there on every backend.

The stores are safe to share between those threads as they are between any threads: SQLite's one
connection is serialised by the store's lock (more threads do not make it faster; they let the
layers' CPU work overlap it), PostgreSQL's calls take a connection from the store's pool each.
The write queue is the Memory's: its jobs keep their leases, and its worker thread
(``start_worker``) is unchanged. A call cancelled while it runs in a thread still finishes
there (an add is stored whole or not at all); one cancelled while awaiting PostgreSQL is rolled
back. The async pool is bound to the event loop it opened on (see ``backends.pg_async``).

    async with AsyncMemory("sqlite:///chat.db") as memory:
        await memory.add("我叫李四", user_id="u1", thread_id="s1")
        context = await memory.context(user_id="u1", thread_id="s1", query="我叫什么？")

Constructing one opens the store as ``Memory`` does, blocking once (migrations, the profile):
build it at startup, or ``await asyncio.to_thread(AsyncMemory, url)``. ``AsyncMemory(memory)``
runs an existing Memory, which stays the caller's (``close`` leaves it open).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any, Concatenate, ParamSpec, TypeVar

from .errors import InvalidInput
from .memory import Memory, MessageLike, read_options
from .profile import Profile
from .replaced import check_replaced, visible, visible_tail_async
from .stores import ANY, AsyncHistory, Store
from .tokens import TokenCounter
from .types import Message, Scope, ThreadInfo

P = ParamSpec("P")
R = TypeVar("R")

#: the executor's cap: blocking calls of one AsyncMemory running at once
DEFAULT_THREADS = 8


def _in_executor(method: Callable[Concatenate[Memory, P], R]) -> Callable[Concatenate[AsyncMemory, P], Coroutine[Any, Any, R]]:
    """``Memory.<method>`` as a coroutine that runs it in the bounded executor."""

    @functools.wraps(method)
    async def call(self: AsyncMemory, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await self.run_sync(method, self.memory, *args, **kwargs)

    call.__doc__ = f"``Memory.{method.__name__}`` in the bounded executor, awaited.\n\n{method.__doc__ or ''}"
    return call


def _like(method: Callable[..., Any]) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Document a method as the async form of ``method`` (its docstring first, then Memory's)."""

    def document(fn: Callable[P, R]) -> Callable[P, R]:
        fn.__doc__ = f"{fn.__doc__ or ''}\n\n``Memory.{method.__name__}``: {method.__doc__ or ''}"
        return fn

    return document


def _wrapping(function: Callable[..., Any], summary: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Give a function ``function``'s signature (``functools.wraps``) and its docstring after ``summary``."""

    def wrap(fn: Callable[P, R]) -> Callable[P, R]:
        wrapped = functools.wraps(function)(fn)
        wrapped.__doc__ = f"{summary}\n\n{function.__doc__ or ''}"
        return wrapped

    return wrap


class AsyncMemory:
    """``Memory`` for asyncio: the same methods, awaited (see the module docstring for where each runs).

    ``store`` and ``options``: as ``Memory``'s (``layers``, ``max_tokens``, ``tenant``, ``preset``,
    ...), or ``store`` an open Memory to run (no options then). ``max_threads``: the executor's cap.
    Use ``async with`` (or ``await close()``) to release the executor, the async pool and, when
    this AsyncMemory opened it, the Memory (its worker stopped after the queued jobs).
    """

    def __init__(
        self, store: Memory | Store | str | os.PathLike[str] | None = None, *, max_threads: int = DEFAULT_THREADS, **options: Any
    ) -> None:
        if isinstance(max_threads, bool) or not isinstance(max_threads, int) or max_threads < 1:
            raise InvalidInput("max_threads must be a whole number of at least 1", field="max_threads")
        if isinstance(store, Memory) and options:
            raise InvalidInput(
                f"AsyncMemory(memory) runs the Memory as configured; options {sorted(options)} are for a new one", field="options"
            )
        self.memory: Memory = store if isinstance(store, Memory) else Memory(store, **options)
        self._owns = not isinstance(store, Memory)
        self.max_threads = max_threads
        self._executor: ThreadPoolExecutor | None = None
        native = getattr(self.memory.store, "async_history", None)
        #: the history's request-path calls: the backend's native async ones, else in the executor
        self._history: AsyncHistory = native() if callable(native) else _InExecutor(self)
        #: whether ``_history`` is the backend's own async I/O (PostgreSQL) rather than the executor
        self.native = callable(native)

    # ---- the executor ------------------------------------------------------------------------

    async def run_sync(self, fn: Callable[..., R], /, *args: Any, **kwargs: Any) -> R:
        """``fn(*args, **kwargs)`` in the bounded executor (with the caller's context variables),
        awaited: for an app's own blocking calls on ``memory.store`` (the server's views do)."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.max_threads, thread_name_prefix="memstack-async")
        call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    # ---- what the Memory is ------------------------------------------------------------------

    @property
    def store(self) -> Store:
        """The Memory's store; its methods block (``run_sync`` them)."""
        return self.memory.store

    @property
    def tenant(self) -> str:
        return self.memory.tenant

    @property
    def counter(self) -> TokenCounter:
        return self.memory.counter

    def scope(self, user_id: str, thread_id: str | None = None, *, tenant: str | None = None, agent_id: str | None = None) -> Scope:
        """A Scope of this Memory's tenant (pure: not awaited)."""
        return self.memory.scope(user_id, thread_id, tenant=tenant, agent_id=agent_id)

    # ---- the request path: native async I/O where the backend has it ---------------------------

    @_like(Memory.add)
    async def add(
        self,
        messages: MessageLike | Iterable[MessageLike],
        *,
        user_id: str,
        thread_id: str,
        tenant: str | None = None,
        agent_id: str | None = None,
        at: datetime | None = None,
        expect_last: int | None | object = ANY,
    ) -> list[Message]:
        """Validated on the loop, stored by the backend's async append (or in the executor)."""
        memory = self.memory
        scope = memory.scope(user_id, thread_id, tenant=tenant, agent_id=agent_id)
        if not memory._tenant_checked(scope.tenant):  # the tenant's profile: read once per process
            await self.run_sync(memory._check_tenant, scope.tenant)
        stored = await self._history.append(scope, memory._batch(messages, at), **memory._append_options(expect_last))
        memory._added()
        return stored

    @_like(Memory.history)
    async def history(
        self,
        *,
        user_id: str,
        thread_id: str,
        tenant: str | None = None,
        agent_id: str | None = None,
        at: datetime | None = None,
        last: int | None = None,
        order: str = "time",
        replaced: str = "exclude",
    ) -> list[Message]:
        """Read by the backend's async I/O (or in the executor)."""
        scope = self.scope(user_id, thread_id, tenant=tenant, agent_id=agent_id)
        options = read_options(at, last, order)
        if check_replaced(replaced) == "include":
            return await self._history.read(scope, **options)
        if last is None:
            return visible(await self._history.read(scope, **options))
        return await visible_tail_async(lambda n: self._history.read(scope, **{**options, "last": n}), last)

    @_like(Memory.threads)
    async def threads(self, *, user_id: str, tenant: str | None = None, agent_id: str | None = None) -> list[ThreadInfo]:
        """The user's threads, most recent activity first, read by the backend's async I/O (or in the executor)."""
        return await self._history.threads(self.scope(user_id, tenant=tenant, agent_id=agent_id))

    @_like(Memory.pending)
    async def pending(self, *, user_id: str | None = None, tenant: str | None = None) -> int:
        """Counted by the backend's async I/O (or in the executor)."""
        return await self._history.pending(self.scope(user_id, tenant=tenant) if user_id else None)

    # ---- everything else: the Memory's methods in the bounded executor -------------------------

    context = _in_executor(Memory.context)
    search = _in_executor(Memory.search)
    memories = _in_executor(Memory.memories)
    audit = _in_executor(Memory.audit)
    usage = _in_executor(Memory.usage)
    extract = _in_executor(Memory.extract)
    forget = _in_executor(Memory.forget)
    forget_saved = _in_executor(Memory.forget_saved)
    import_ = _in_executor(Memory.import_)
    requeue = _in_executor(Memory.requeue)
    run_jobs = _in_executor(Memory.run_jobs)
    flush = _in_executor(Memory.flush)
    stop_worker = _in_executor(Memory.stop_worker)
    retention_pass = _in_executor(Memory.retention_pass)

    @_like(Memory.export)
    async def export(self, *, user_id: str, tenant: str | None = None) -> AsyncIterator[dict[str, Any]]:
        """An async iterator of the records, read in the executor in one go."""
        for record in await self.run_sync(lambda: list(self.memory.export(user_id=user_id, tenant=tenant))):
            yield record

    @classmethod
    @_wrapping(
        vars(Memory)["configure"].__func__,  # the function itself: its signature has the store
        "``Memory.configure`` in a thread of asyncio's default executor (there is no instance yet), awaited.",
    )
    async def configure(cls, *args: Any, **kwargs: Any) -> tuple[Profile, int]:
        return await asyncio.to_thread(Memory.configure, *args, **kwargs)

    # ---- the write queue's worker and closing ---------------------------------------------------

    def start_worker(self, *, poll_seconds: float = 1.0) -> None:
        """``Memory.start_worker``: starts the Memory's worker thread and returns (not awaited)."""
        self.memory.start_worker(poll_seconds=poll_seconds)

    @property
    def worker_running(self) -> bool:
        return self.memory.worker_running

    async def open(self) -> AsyncMemory:
        """Open the backend's async pool on the running loop now (else the first call opens it)."""
        opener = getattr(self._history, "open", None)
        if opener is not None:
            await opener()
        return self

    async def close(self) -> None:
        """Close the async pool and the executor, and the Memory if this AsyncMemory opened it
        (its worker stops after the queued jobs, in a thread). Harmless twice; a later call
        opens a new executor and pool (over a Memory that is still open)."""
        await self._history.aclose()
        if self._owns:
            await self.run_sync(self.memory.close)
        executor, self._executor = self._executor, None
        if executor is not None:
            await asyncio.to_thread(executor.shutdown)

    aclose = close

    async def __aenter__(self) -> AsyncMemory:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncMemory({self.memory.store!r}, native={self.native}, max_threads={self.max_threads})"


class _InExecutor:
    """``AsyncHistory`` for a backend without native async I/O: its store's calls in the executor."""

    def __init__(self, owner: AsyncMemory) -> None:
        self._owner = owner

    async def append(self, scope: Scope, messages: Sequence[Message], **options: Any) -> list[Message]:
        return await self._owner.run_sync(self._owner.store.history.append, scope, messages, **options)

    async def read(self, scope: Scope, **options: Any) -> list[Message]:
        return await self._owner.run_sync(self._owner.store.history.read, scope, **options)

    async def threads(self, scope: Scope) -> list[ThreadInfo]:
        return await self._owner.run_sync(self._owner.store.history.threads, scope)

    async def pending(self, scope: Scope | None = None) -> int:
        return await self._owner.run_sync(self._owner.store.jobs.pending, scope)

    async def aclose(self) -> None:
        return None
