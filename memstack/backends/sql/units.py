"""The unit store's reads that SQLite and PostgreSQL write alike, for a ``Dialect``.

The tables differ (SQLite keeps a unit's time as ISO text and UTC microseconds, PostgreSQL as
timestamptz and its offset; the postings' DDL and triggers are each dialect's own), so each
backend keeps its columns, its row codec (``unit_of``), its writes and its BM25 statement; what is
here is the SQL text they share, with the rows read through the caller's ``Fetch``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ...types import Scope, Unit
from ..rules.units import thread_rounds
from .dialect import Dialect, Fetch
from .where import with_agent


def users_query(d: Dialect, tenant: str, thread_id: str | None) -> tuple[str, list[Any]]:
    """The tenant's users with units (in the thread, if given), in order."""
    sql, params = f"SELECT DISTINCT user_id FROM {d.table('units')} WHERE tenant = {d.mark}", [tenant]
    if thread_id is not None:
        sql += f" AND thread_id = {d.mark}"
        params.append(thread_id)
    return sql + " ORDER BY user_id", params


def in_rounds(
    fetch: Fetch, d: Dialect, columns: str, unit_of: Callable[[Sequence[Any]], Unit], scope: Scope, rounds: Sequence[int]
) -> list[Unit]:
    """``UnitStore.in_rounds``: the units of the scope's thread (its exact key) in ``rounds``."""
    wanted = sorted(thread_rounds(scope, rounds))
    if not wanted:
        return []
    condition, params = d.any_of("round", wanted)
    sql = f"SELECT {columns} FROM {d.table('units')} WHERE {d.key} AND {condition}"
    return [unit_of(row) for row in fetch(sql, [scope.tenant, scope.user_id, scope.agent_id or "", scope.thread_id, *params])]


def in_order(ids: Sequence[str], rows: Iterable[Sequence[Any]], unit_of: Callable[[Sequence[Any]], Unit]) -> list[Unit]:
    """``UnitStore.get``'s answer from the rows found (in agent order): the units in the order of
    ``ids``, an id several of the user's agents hold giving each of them."""
    found: dict[str, list[Unit]] = {}
    for row in rows:
        found.setdefault(row[4], []).append(unit_of(row))
    return [u for i in dict.fromkeys(ids) for u in found.get(i, ())]


def pages(
    fetch: Fetch,
    d: Dialect,
    columns: str,
    unit_of: Callable[[Sequence[Any]], Unit],
    scope: Scope | None,
    *,
    batch: int,
    thread_id: str | None,
) -> Iterator[list[Unit]]:
    """``UnitStore.iterate``: batches in insertion order (per agent for a user), each page read by
    its own ``fetch`` after the last one's ``n``."""
    thread = (f"thread_id = {d.mark} AND", [thread_id]) if thread_id is not None else ("", [])
    if scope is None:
        yield from _pages(fetch, d, columns, unit_of, thread[0], thread[1], batch)
        return
    sql, params = with_agent(d, f"SELECT owner FROM {d.table('unit_owners')} WHERE {d.user}", scope)
    owners = [owner for (owner,) in fetch(sql + " ORDER BY owner", params)]
    for owner in owners:
        yield from _pages(fetch, d, columns, unit_of, f"owner = {d.mark} AND " + thread[0], [owner, *thread[1]], batch)


def _pages(
    fetch: Fetch, d: Dialect, columns: str, unit_of: Callable[[Sequence[Any]], Unit], condition: str, params: list[Any], batch: int
) -> Iterator[list[Unit]]:
    after = 0
    while True:
        rows = fetch(
            f"SELECT {columns}, n FROM {d.table('units')} WHERE {condition} n > {d.mark} ORDER BY n LIMIT {d.mark}", [*params, after, batch]
        )
        if not rows:
            return
        yield [unit_of(row) for row in rows]
        after = rows[-1][-1]
