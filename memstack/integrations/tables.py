"""The adapters' own tables, kept beside a memstack store's data: ``lg_*`` tables in its SQLite file.

LangGraph's checkpoints (one blob per channel version, pending writes per task) and its key-value
store (namespaced JSON items with their vectors) fit none of memstack's contracts, and the
backends stay untouched: the adapters add their own tables to the same SQLite file, through the
store's own connection and write lock, so one file holds a user's messages and their agent's
state. They migrate on their own, append-only, recorded in ``lg_migrations`` (never in memstack's
``_migrations``, so a file the adapters touched still opens in a process that never imports them).

A ``memory://`` store gets a private in-process SQLite database instead, shared by every adapter
over that store object and lost with it, like the store itself. Other backends are refused.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ..errors import SchemaError, StoreError, UsageError
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
        CREATE INDEX lg_items_updated ON lg_items (tenant, updated_at);
        CREATE TABLE lg_item_vectors (
            tenant TEXT NOT NULL, prefix TEXT NOT NULL, key TEXT NOT NULL, field TEXT NOT NULL,
            model TEXT NOT NULL, vector BLOB NOT NULL,
            PRIMARY KEY (tenant, prefix, key, field)
        )
        """,
    ),
]


class Tables:
    """A SQLite connection for the ``lg_*`` tables: the store's own (its lock and transactions), or
    a private in-memory one for ``memory://``. ``write()`` is one transaction; ``query`` one read."""

    def __init__(self, store: Store) -> None:
        from ..backends.memory import MemoryStore
        from ..backends.sqlite import SQLiteStore

        if isinstance(store, SQLiteStore):
            self._sqlite: Any = store
        elif isinstance(store, MemoryStore):
            self._sqlite = _private_database(store)
        else:
            raise UsageError(f"the LangGraph adapters keep their tables in SQLite: open a sqlite:/// or memory:// store, not {store.url}")
        self.store = store
        migrate(self)

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        with self._sqlite.write() as db:
            yield db

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        return self._sqlite.query(sql, params)


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
    """Apply the ``lg_*`` migrations the database lacks, each in its own transaction."""
    known = [name for name, _ in MIGRATIONS]
    with tables.write() as db:
        db.execute("CREATE TABLE IF NOT EXISTS lg_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    applied = [row[0] for row in tables.query("SELECT name FROM lg_migrations ORDER BY rowid")]
    unknown = [name for name in applied if name not in known]
    if unknown:
        raise SchemaError(f"database has LangGraph adapter migrations unknown to this memstack version: {', '.join(unknown)}; upgrade memstack")
    done = []
    for name, script in MIGRATIONS:
        if name in applied:
            continue
        with tables.write() as db:
            if db.execute("SELECT 1 FROM lg_migrations WHERE name = ?", (name,)).fetchone() is None:
                for statement in script.split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute("INSERT INTO lg_migrations VALUES (?, ?)", (name, utcnow().isoformat()))
                done.append(name)
    return done


class _PrivateSQLite:
    """An in-memory SQLite database with the same ``write``/``query`` surface as SQLiteStore."""

    def __init__(self) -> None:
        self._db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self._lock = threading.RLock()

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except sqlite3.Error as exc:
                self._db.execute("ROLLBACK")
                raise StoreError(f"SQLite write failed: {exc}") from exc
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            else:
                self._db.execute("COMMIT")

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        with self._lock:
            try:
                return self._db.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite read failed: {exc}") from exc


#: one private database per memory:// store object, so a saver and a store over it share one
_PRIVATE: weakref.WeakKeyDictionary[Any, _PrivateSQLite] = weakref.WeakKeyDictionary()
_PRIVATE_LOCK = threading.Lock()


def _private_database(store: Any) -> _PrivateSQLite:
    with _PRIVATE_LOCK:
        if store not in _PRIVATE:
            _PRIVATE[store] = _PrivateSQLite()
        return _PRIVATE[store]
