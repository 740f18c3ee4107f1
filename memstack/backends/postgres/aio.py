"""The PostgreSQL history on psycopg's async pool: ``AsyncHistory`` for ``AsyncMemory``.

The statements are PostgresStore's own (``history.append_steps`` and the other steps, driven by
``steps.arun``), on an ``AsyncConnectionPool`` of the store's database and schema, so an add or
a history read awaits the database instead of holding a thread. The pool opens on first use (or
``open()``), on the running event loop, and is bound to it: used from another loop (a new test
client's, a restarted app's), it opens a fresh pool there. Errors are translated as the store's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, Unpack

from ...stores import ANY, ReadOptions
from ...types import Message, Scope, ThreadInfo
from .database import load_driver, quote_identifier, translate_errors
from .history import append_steps, pending_steps, read_steps, threads_steps
from .steps import Steps, arun

log = logging.getLogger("memstack")


class AsyncPostgresHistory:
    """``AsyncHistory`` over one PostgreSQL schema: ``max_size`` async connections, all opened
    with the pool (``min_size`` is the sync pool's; see ``open``), a call waiting up to
    ``pool_timeout`` seconds for one."""

    def __init__(
        self,
        conninfo: str,
        schema: str,
        connect_kwargs: dict[str, Any],
        *,
        min_size: int = 1,
        max_size: int = 10,
        open_timeout: float = 5.0,
        pool_timeout: float = 30.0,
    ) -> None:
        self._psycopg, self._pools = load_driver()
        self._conninfo = conninfo
        self._schema = schema
        self._kwargs = dict(connect_kwargs)
        self._size = (min_size, max_size)
        self._open_timeout = open_timeout
        self._pool_timeout = pool_timeout
        self._pool: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._opening: asyncio.Lock | None = None

    async def open(self) -> None:
        """Open the pool on the running loop (a pool of another, finished loop is dropped)."""
        loop = asyncio.get_running_loop()
        if self._pool is not None and self._loop is loop:
            return
        if self._opening is None or self._loop is not loop:
            self._opening, self._loop = asyncio.Lock(), loop
            self._pool = None  # (bound to a loop that is gone: its connections go with it)
        async with self._opening:
            if self._pool is not None:
                return
            pool = self._pools.AsyncConnectionPool(
                self._conninfo,
                # fixed size, all opened here: a pool that grows runs the growth as a task whose
                # worker swallows a cancellation (psycopg_pool catches CancelledError in its
                # workers), so a loop that ended while one ran (asyncio.run, with the pool left
                # open) waited for it for ever (twice in CI, the suite's first test on a fresh server)
                min_size=self._size[1],
                max_size=self._size[1],
                kwargs=self._kwargs,
                configure=self._configure,
                check=self._pools.AsyncConnectionPool.check_connection,
                timeout=self._pool_timeout,
                name=f"memstack-async:{self._schema}",
                open=False,
            )
            with translate_errors(self._psycopg, "connecting"):
                try:
                    await pool.open(wait=True, timeout=self._open_timeout)
                except BaseException:
                    await pool.close()
                    raise
            self._pool = pool

    async def _configure(self, conn: Any) -> None:
        await conn.execute(
            "SELECT set_config('search_path', %s, false), set_config('TimeZone', 'UTC', false)", (quote_identifier(self._schema),)
        )

    async def _run(self, doing: str, steps: Steps[Any]) -> Any:
        await self.open()
        with translate_errors(self._psycopg, doing):
            async with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
                return await arun(cur, steps)

    async def append(
        self, scope: Scope, messages: Sequence[Message], *, enqueue: Sequence[str] = (), expect_last: int | None | object = ANY
    ) -> list[Message]:
        return await self._run("appending messages", append_steps(self._schema, scope, messages, enqueue, expect_last))

    async def read(self, scope: Scope, **options: Unpack[ReadOptions]) -> list[Message]:
        return await self._run("reading messages", read_steps(scope, options))

    async def threads(self, scope: Scope) -> list[ThreadInfo]:
        return await self._run("listing threads", threads_steps(scope))

    async def pending(self, scope: Scope | None = None) -> int:
        return await self._run("counting pending jobs", pending_steps(scope))

    async def aclose(self) -> None:
        """Close the pool if it is this loop's (another loop's went with that loop); reopened by the next call."""
        pool, self._pool = self._pool, None
        if pool is not None and self._loop is asyncio.get_running_loop():
            await pool.close()

    def __repr__(self) -> str:
        return f"AsyncPostgresHistory(schema={self._schema!r})"
