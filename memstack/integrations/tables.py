"""The adapters' own tables, kept beside a memstack store's data: ``lg_*`` tables in its database.

LangGraph's checkpoints (one blob per channel version, pending writes per task) and its key-value
store (namespaced JSON items with their vectors) fit none of memstack's contracts, and the
backends stay untouched: the adapters add their own tables to the same database, through the
store's own connection (SQLite: its connection and write lock; PostgreSQL: its pool and schema),
so one database holds a user's messages and their agent's state. They migrate on their own,
append-only, recorded in ``lg_migrations`` (never in memstack's migration table, so a database
the adapters touched still opens in a process that never imports them).

A ``memory://`` store gets a private in-process SQLite database instead, shared by every adapter
over that store object and lost with it, like the store itself (``backends.adapter_rows``, where
the backends' user deletion reaches the checkpoints). ``jsonl://`` is refused.

The schema (``MIGRATIONS``) lives with the backends (``backends.sql.adapter_tables``), so that
a copy of a store (``memstack.transfer``) carries these tables without importing the adapters.
SQL is written once, with ``?`` placeholders and syntax both databases take; PostgreSQL gets
``%s``, and its tables BYTEA for BLOB and byte-wise ("C") collation of text, as SQLite orders it.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ..backends.memory.side import side_database
from ..backends.sql.adapter_tables import MIGRATIONS
from ..backends.sql.adapter_tables import migrate as migrate_tables
from ..errors import UsageError
from ..stores import Store

__all__ = ["MIGRATIONS", "Tables", "Tx", "migrate", "open_tables"]


class Tx:
    """One transaction's statements, in the adapters' SQL (``?`` placeholders)."""

    def __init__(self, run: Callable[[str, Sequence[Any]], list[tuple]], run_many: Callable[[str, list[Sequence[Any]]], None]) -> None:
        self._run = run
        self._run_many = run_many

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        """Run one statement; its rows ([] for a statement without any)."""
        return self._run(sql, params)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            self._run_many(sql, list(rows))


class Tables:
    """The ``lg_*`` tables of one store: ``write()`` is one transaction, ``query`` one read."""

    def __init__(self, store: Store) -> None:
        from ..backends.memory import MemoryStore
        from ..backends.postgres import PostgresStore
        from ..backends.sqlite import SQLiteStore

        if isinstance(store, SQLiteStore):
            self._db: Any = _SQLite(store)
        elif isinstance(store, MemoryStore):
            self._db = _private_database(store)
        elif isinstance(store, PostgresStore):
            self._db = _Postgres(store)
        else:
            raise UsageError(
                f"the LangGraph adapters keep their tables in SQLite or PostgreSQL: open a sqlite://, postgresql:// or memory:// store, not {store.url}"
            )
        self.store = store
        self.dialect: str = self._db.dialect
        migrate(self)

    def write(self):
        """A context manager: a Tx in a write transaction (committed on success)."""
        return self._db.write()

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        with self._db.read() as tx:
            return tx.execute(sql, params)


def open_tables(target: Any) -> Tables:
    """Tables beside ``target``: a Memory (its store), a Store, a URL or path ``open_store`` takes,
    or None for the default SQLite file under MEMSTACK_HOME (the one ``Memory()`` opens)."""
    from ..backends import open_store
    from ..memory import Memory

    if isinstance(target, Memory):
        return Tables(target.store)
    if target is None or isinstance(target, (str, os.PathLike)):
        return Tables(open_store(target))
    return Tables(target)


def migrate(tables: Tables) -> list[str]:
    """Apply the ``lg_*`` migrations the database lacks, in one transaction
    (``backends.sql.adapter_tables.migrate``, where the schema lives: a copy creates it too)."""
    with tables.write() as tx:
        return migrate_tables(tx.execute, tables.dialect)


# ---- the databases ---------------------------------------------------------------------------


def _sqlite_tx(db: sqlite3.Connection) -> Tx:
    def run_many(sql: str, rows: list[Sequence[Any]]) -> None:
        db.executemany(sql, rows)

    return Tx(lambda sql, params: db.execute(sql, params).fetchall(), run_many)


class _SQLite:
    """A SQLiteStore's connection: its write transactions (BEGIN IMMEDIATE) and its lock
    (``store``: what has ``write()``, the store or a side database)."""

    dialect = "sqlite"

    def __init__(self, store: Any) -> None:
        self.store = store

    @contextmanager
    def write(self) -> Iterator[Tx]:
        with self.store.write() as db:
            yield _sqlite_tx(db)

    @contextmanager
    def read(self) -> Iterator[Tx]:
        yield Tx(lambda sql, params: self.store.query(sql, params), lambda sql, rows: None)


class _PrivateSQLite(_SQLite):
    """A memory:// store's side database (``backends.adapter_rows``), in the adapters' Tx: written
    as a SQLite store is, read in a transaction of its own."""

    @contextmanager
    def read(self) -> Iterator[Tx]:
        with self.store.read() as db:
            yield _sqlite_tx(db)


class _Postgres:
    """A PostgresStore's pool and schema; every call one transaction, errors translated by it."""

    dialect = "postgresql"

    def __init__(self, store: Any) -> None:
        self.database = store._db  # the backend's pool, schema and error translation

    @contextmanager
    def write(self) -> Iterator[Tx]:
        with self.database.transaction("writing the LangGraph adapters' tables") as cur:
            yield self._tx(cur)

    read = write

    @staticmethod
    def _tx(cur: Any) -> Tx:
        def run(sql: str, params: Sequence[Any]) -> list[tuple]:
            cur.execute(_postgres_sql(sql), params)
            return cur.fetchall() if cur.description else []

        return Tx(run, lambda sql, rows: cur.executemany(_postgres_sql(sql), rows))


def _postgres_sql(sql: str) -> str:
    return sql.replace("?", "%s")


def _private_database(store: Any) -> _PrivateSQLite:
    """The memory:// store's side database, shared by every adapter over that store object."""
    side = side_database(store)
    assert side is not None
    return _PrivateSQLite(side)
