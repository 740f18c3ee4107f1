"""SQL as steps: one PostgreSQL statement sequence, run by a blocking or an asyncio driver.

A step function is a generator that yields ``Sql`` statements, receives each one's result, and
returns the call's value; it holds the logic (which statements, in which order, what their rows
mean) and no I/O. ``run`` drives it on a psycopg ``Cursor``, ``arun`` on an ``AsyncCursor``: the
sync store and the async path (``aio``) send the same SQL, written once (psycopg's own
protocol code is built the same way: generators driven by a blocking or an async wait)::

    def count(key) -> Steps[int]:
        row = yield Sql("SELECT count(*) FROM t WHERE k = %s", (key,), fetch="one")
        return row[0]

    n = run(cur, count("a"))           # psycopg.Cursor
    n = await arun(acur, count("a"))   # psycopg.AsyncCursor
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

T = TypeVar("T")
Fetch = Literal["rowcount", "one", "all", "each"]
Steps = Generator["Sql", Any, T]


@dataclass(frozen=True, slots=True)
class Sql:
    """One statement and what its step gets back: the ``rowcount``, ``one`` row (or None), ``all``
    rows, or ``each``: with ``many``, the first column of the row returned for each parameter set
    (None where it returned none)."""

    text: str
    params: Any = ()
    many: bool = False
    fetch: Fetch = "rowcount"


def run(cur: Any, steps: Steps[T]) -> T:
    """Drive ``steps`` on a blocking psycopg cursor (inside the caller's transaction)."""
    try:
        sql = next(steps)
        while True:
            if sql.many:
                cur.executemany(sql.text, sql.params, returning=sql.fetch == "each")
            else:
                cur.execute(sql.text, sql.params)
            if sql.fetch == "one":
                result: Any = cur.fetchone()
            elif sql.fetch == "all":
                result = cur.fetchall()
            elif sql.fetch == "each":
                result = []
                while True:
                    row = cur.fetchone()
                    result.append(row[0] if row else None)
                    if not cur.nextset():
                        break
            else:
                result = cur.rowcount
            sql = steps.send(result)
    except StopIteration as done:
        return done.value


async def arun(cur: Any, steps: Steps[T]) -> T:
    """Drive ``steps`` on a psycopg ``AsyncCursor``: the same statements as ``run``, awaited."""
    try:
        sql = next(steps)
        while True:
            if sql.many:
                await cur.executemany(sql.text, sql.params, returning=sql.fetch == "each")
            else:
                await cur.execute(sql.text, sql.params)
            if sql.fetch == "one":
                result: Any = await cur.fetchone()
            elif sql.fetch == "all":
                result = await cur.fetchall()
            elif sql.fetch == "each":
                result = []
                while True:
                    row = await cur.fetchone()
                    result.append(row[0] if row else None)
                    if not cur.nextset():
                        break
            else:
                result = cur.rowcount
            sql = steps.send(result)
    except StopIteration as done:
        return done.value
