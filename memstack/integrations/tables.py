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

SQL is written once, with ``?`` placeholders and syntax both databases take; PostgreSQL gets
``%s``, and its tables BYTEA for BLOB and byte-wise ("C") collation of text, as SQLite orders it.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ..backends.memory.side import SideDatabase, side_database
from ..errors import SchemaError, UsageError
from ..stores import Store
from ..types import utcnow

#: Append-only: never edit or reorder an entry; add a new one at the end.
MIGRATIONS: list[tuple[str, str]] = [
    (
        "lg_001_checkpoints",
        """
        CREATE TABLE lg_checkpoints (
            tenant TEXT NOT NULL, thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, checkpoint_id TEXT NOT NULL,
            parent_id TEXT, type TEXT NOT NULL, checkpoint BLOB NOT NULL, metadata_type TEXT NOT NULL, metadata BLOB NOT NULL,
            run_id TEXT, user_id TEXT,
            PRIMARY KEY (tenant, thread_id, checkpoint_ns, checkpoint_id)
        );
        CREATE INDEX lg_checkpoints_run ON lg_checkpoints (tenant, run_id) WHERE run_id IS NOT NULL;
        CREATE INDEX lg_checkpoints_user ON lg_checkpoints (tenant, user_id) WHERE user_id IS NOT NULL;
        CREATE TABLE lg_blobs (
            tenant TEXT NOT NULL, thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, channel TEXT NOT NULL, version TEXT NOT NULL,
            type TEXT NOT NULL, blob BLOB NOT NULL,
            PRIMARY KEY (tenant, thread_id, checkpoint_ns, channel, version)
        );
        CREATE TABLE lg_writes (
            tenant TEXT NOT NULL, thread_id TEXT NOT NULL, checkpoint_ns TEXT NOT NULL, checkpoint_id TEXT NOT NULL,
            task_id TEXT NOT NULL, idx INTEGER NOT NULL, channel TEXT NOT NULL, type TEXT NOT NULL, value BLOB NOT NULL,
            task_path TEXT NOT NULL DEFAULT '',
            PRIMARY KEY (tenant, thread_id, checkpoint_ns, checkpoint_id, task_id, idx)
        )
        """,
    ),
    (
        "lg_002_store",
        """
        CREATE TABLE lg_items (
            tenant TEXT NOT NULL, prefix TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
            created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
            PRIMARY KEY (tenant, prefix, key)
        );
        CREATE TABLE lg_item_vectors (
            tenant TEXT NOT NULL, prefix TEXT NOT NULL, key TEXT NOT NULL, field TEXT NOT NULL,
            model TEXT NOT NULL, vector BLOB NOT NULL,
            PRIMARY KEY (tenant, prefix, key, field)
        )
        """,
    ),
]


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
    """Apply the ``lg_*`` migrations the database lacks, in one transaction (serialised across
    processes by SQLite's write lock or a PostgreSQL advisory lock)."""
    known = [name for name, _ in MIGRATIONS]
    with tables.write() as tx:
        if tables.dialect == "postgresql":
            tx.execute("SELECT pg_advisory_xact_lock(hashtextextended(CAST(? AS TEXT), 0))", ("memstack.lg_migrate",))
        tx.execute("CREATE TABLE IF NOT EXISTS lg_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
        applied = [row[0] for row in tx.execute("SELECT name FROM lg_migrations")]
        unknown = sorted(name for name in applied if name not in known)
        if unknown:
            raise SchemaError(
                f"database has LangGraph adapter migrations unknown to this memstack version: {', '.join(unknown)}; upgrade memstack"
            )
        done = []
        for name, script in MIGRATIONS:
            if name not in applied:
                for statement in script.split(";"):
                    if statement.strip():
                        tx.execute(_ddl(statement, tables.dialect))
                tx.execute("INSERT INTO lg_migrations VALUES (?, ?)", (name, utcnow().isoformat()))
                done.append(name)
    return done


# ---- the databases ---------------------------------------------------------------------------


def _ddl(statement: str, dialect: str) -> str:
    """PostgreSQL's spelling of a CREATE statement: BYTEA for BLOB, text ordered byte-wise."""
    if dialect != "postgresql":
        return statement
    return re.sub(r"\bTEXT\b", 'TEXT COLLATE "C"', re.sub(r"\bBLOB\b", "BYTEA", statement))


def _sqlite_tx(db: sqlite3.Connection) -> Tx:
    def run_many(sql: str, rows: list[Sequence[Any]]) -> None:
        db.executemany(sql, rows)

    return Tx(lambda sql, params: db.execute(sql, params).fetchall(), run_many)


class _SQLite:
    """A SQLiteStore's connection: its write transactions (BEGIN IMMEDIATE) and its lock."""

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


class _PrivateSQLite:
    """A memory:// store's side database (``backends.adapter_rows``), in the adapters' Tx."""

    dialect = "sqlite"

    def __init__(self, side: SideDatabase) -> None:
        self.side = side

    @contextmanager
    def write(self) -> Iterator[Tx]:
        with self.side.write() as db:
            yield _sqlite_tx(db)

    @contextmanager
    def read(self) -> Iterator[Tx]:
        with self.side.read() as db:
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
