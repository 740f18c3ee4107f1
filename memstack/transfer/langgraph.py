"""LangGraph's own tables through a copy: the ``lg_*`` rows the adapters keep beside a store's data
(``integrations.tables``; schema and row steps in ``backends.sql.adapter_tables``), copied byte
for byte between SQLite, PostgreSQL and a ``memory://`` store's side database, so that a graph
compiled with memstack's saver on the destination resumes the same thread.

Only when the source has them (an adapter ever opened them): the destination's tables are then
made by the adapters' own migrations, recorded as the adapters record them. No langgraph import:
the values stay in LangGraph's serialisation, untouched.

What travels: for a whole tenant, every thread of it (tagged with a user or not) and the items of
LangGraph's key-value store; for some users (``--user``), the threads tagged with them (as a
user's deletion selects them, ``backends.sql.adapter_rows``), not the key-value items, which
name no user. A thread's rows are written in one transaction, each row skipped when its key is
held already, so a copy killed anywhere is finished by running it again, nothing doubled.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from ..backends.memory import MemoryStore
from ..backends.memory.side import side_database
from ..backends.postgres import PostgresStore
from ..backends.sql import adapter_tables as lg
from ..backends.sqlite import SQLiteStore
from ..errors import InvalidInput, UsageError
from ..stores import Store

#: the kind's name in a copy's report and a verify's differences
KIND = "langgraph"


@contextmanager
def _transaction(store: Store, *, create: bool = False) -> Iterator[tuple[lg.Query, str] | None]:
    """(query, dialect) in one transaction of the store's database (None: a backend without one,
    or a memory:// store whose side database was never made and ``create`` is False)."""
    if isinstance(store, SQLiteStore):
        with store.write() as db:
            yield (lambda sql, params: db.execute(sql, params).fetchall()), "sqlite"
    elif isinstance(store, PostgresStore):
        with store._db.transaction("copying LangGraph's tables") as cur:  # its pool and schema, as the adapters use them

            def query(sql: str, params: Sequence[Any]) -> list[tuple]:
                cur.execute(sql.replace("?", "%s"), params)  # type: ignore[arg-type]  # built from the module's own constants
                return cur.fetchall() if cur.description else []

            yield query, "postgresql"
    elif isinstance(store, MemoryStore) and (side := side_database(store, create=create)) is not None:
        with side.write() as db:
            yield (lambda sql, params: db.execute(sql, params).fetchall()), "sqlite"
    else:
        yield None


def tenants(store: Store) -> list[str]:
    """The tenants with LangGraph rows (a store used as a checkpointer only holds nothing else)."""
    with _transaction(store) as opened:
        if opened is None or not lg.present(*opened):
            return []
        return lg.tenants(opened[0])


def threads(store: Store, tenant: str, users: Sequence[str] | None) -> list[str] | None:
    """The threads a copy of ``users`` (None: the whole tenant) carries; None: no tables."""
    with _transaction(store) as opened:
        if opened is None or not lg.present(*opened):
            return None
        return lg.threads(opened[0], tenant, users)


def check(src: Store, dst: Store, tenant: str) -> None:
    """UsageError, before anything is written, when the source has LangGraph rows of the tenant
    and the destination keeps no SQL database for them (the JSON-lines backend)."""
    if isinstance(dst, (SQLiteStore, PostgresStore, MemoryStore)):
        return
    if threads(src, tenant, None) or _items(src, tenant):
        raise UsageError(
            f"the {type(dst).__name__} backend keeps no LangGraph tables, which the source holds; copy to sqlite, postgresql or memory"
        )


def _items(store: Store, tenant: str) -> dict[str, list[tuple]]:
    with _transaction(store) as opened:
        if opened is None or not lg.present(*opened):
            return {}
        return {t: rows for t, rows in lg.item_rows(opened[0], tenant).items() if rows}


def rows(store: Store, tenant: str, users: Sequence[str] | None) -> Iterator[tuple[str, list[tuple]]]:
    """(table, rows) of what a copy carries: thread by thread, then (whole tenant) the items."""
    for thread in threads(store, tenant, users) or []:
        with _transaction(store) as opened:
            assert opened is not None
            yield from lg.thread_rows(opened[0], tenant, thread).items()
    if users is None:
        yield from _items(store, tenant).items()


def copy(src: Store, dst: Store, tenant: str, users: Sequence[str] | None) -> int:
    """Copy the rows (``rows``) into the destination's tables, made there first if need be;
    returns the rows read (0 when the source has no tables)."""
    chosen = threads(src, tenant, users)
    if chosen is None:
        return 0
    with _transaction(dst, create=True) as opened:
        assert opened is not None  # check() refused the others
        lg.migrate(*opened)
    read = 0
    for thread in chosen:
        with _transaction(src) as source:
            assert source is not None
            held = lg.thread_rows(source[0], tenant, thread)
        with _transaction(dst, create=True) as opened:  # a thread at once: never half of one
            assert opened is not None
            for table, found in held.items():
                lg.insert(opened[0], table, found)
                read += len(found)
    if users is None:
        items = _items(src, tenant)
        with _transaction(dst, create=True) as opened:
            assert opened is not None
            for table, found in items.items():
                lg.insert(opened[0], table, found)
                read += len(found)
    return read


def digest_items(store: Store, tenant: str, users: Sequence[str] | None) -> Iterator[dict[str, Any]]:
    """Each row as a digest item (``digest``): its table and columns, bytes as hex."""
    for table, found in rows(store, tenant, users):
        for row in found:
            yield {"table": table} | {
                c: (bytes(v).hex() if isinstance(v, (bytes, memoryview)) else v) for c, v in zip(lg.COLUMNS[table], row, strict=True)
            }


# ---- the JSON-lines export's form (``portable``) ---------------------------------------------


def encode(table: str, row: Sequence[Any]) -> dict[str, Any]:
    """A row as an export item: ``table``, and ``row`` its columns by name (bytes in base64; the
    row apart, since LangGraph's columns include a ``type``)."""
    blobs = lg.BLOBS[table]
    columns = {
        c: (base64.b64encode(bytes(v)).decode() if c in blobs and v is not None else v) for c, v in zip(lg.COLUMNS[table], row, strict=True)
    }
    return {"table": table, "row": columns}


def decode(item: Mapping[str, Any]) -> tuple[str, tuple[Any, ...]]:
    """(table, row) of an export item; InvalidInput naming what is wrong."""
    table = item.get("table")
    if table not in lg.COLUMNS:
        raise InvalidInput(f"a langgraph item names one of {', '.join(lg.COLUMNS)}, not {table!r}", field="table")
    given = item.get("row")
    if not isinstance(given, Mapping):
        raise InvalidInput(f"a langgraph item's row is an object of {table}'s columns", field="row")
    row = []
    for column in lg.COLUMNS[table]:
        if column not in given:
            raise InvalidInput(f"a row of {table} has {column!r}", field=column)
        value = given[column]
        if column in lg.BLOBS[table] and value is not None:
            try:
                value = base64.b64decode(str(value), validate=True)
            except (binascii.Error, ValueError) as exc:
                raise InvalidInput(f"{table}.{column} is not base64: {exc}", field=column) from exc
        row.append(value)
    return table, tuple(row)


def user_items(store: Store, tenant: str, user: str) -> Iterator[dict[str, Any]]:
    """The user's LangGraph threads (tagged with the user) as export items."""
    for table, found in rows(store, tenant, [user]):
        for row in found:
            yield encode(table, row)


def restore(store: Store, items: Sequence[Mapping[str, Any]]) -> int:
    """Store export items in the store's tables (made if need be), each row skipped when its key
    is held; returns the rows stored. UsageError for a backend without the tables."""
    decoded = [decode(item) for item in items]
    if not decoded:
        return 0
    with _transaction(store, create=True) as opened:
        if opened is None:
            raise UsageError(f"the {type(store).__name__} backend keeps no LangGraph tables; import into sqlite, postgresql or memory")
        lg.migrate(*opened)
        return sum(lg.insert(opened[0], table, [row]) for table, row in decoded)
