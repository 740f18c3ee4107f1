"""The framework adapters' rows as a user's deletion reaches them: LangGraph checkpoints (``lg_*``).

The LangGraph checkpointer (``memstack.integrations.langgraph_saver``) keeps its tables in the
store's own database and tags each checkpoint with the ``user_id`` of the config it was put
under. Forgetting a user (``Memory.forget``, ``memstack forget``, ``DELETE /v1/users/{user}``, in
any process) must reach them, and the core never imports the integrations; so the deletion rule
lives here, under the backends, and each backend runs it in its own delete transaction:

- a user: every thread (all its namespaces, checkpoints, blobs and pending writes) with a
  checkpoint tagged with the user, in the tenant;
- a thread (``Memory.forget(user_id=..., thread_id=...)``): that thread's rows, when one of its
  checkpoints is tagged with the user (a thread never tagged with the user is left alone).

Nothing happens in a database without the tables (a process that never used the adapters).
A ``memory://`` store has no SQL database of its own: the adapters keep their tables in a
private in-process SQLite database per store object, ``side_database(store)``, also here, so the
memory backend reaches it the same way.
"""

from __future__ import annotations

import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import StoreError
from ..types import Scope

#: the checkpointer's tables, the ones that hold a thread's rows (checkpoints last: it is the one
#: the user's threads are selected from)
CHECKPOINT_TABLES = ("lg_blobs", "lg_writes", "lg_checkpoints")

#: a statement runner of one transaction: (sql with ``?`` placeholders, params) -> a DB-API cursor
Run = Callable[[str, tuple], Any]


def delete_checkpoints(run: Run, dialect: str, scope: Scope, *, thread_id: str | None = None) -> int:
    """Delete the user's LangGraph threads (or the one thread) in ``run``'s transaction; rows deleted."""
    if not _has_checkpoints(run, dialect):
        return 0
    threads = "SELECT thread_id FROM lg_checkpoints WHERE tenant = ? AND user_id = ?"
    params: tuple = (scope.tenant, scope.user_id)
    if thread_id is not None:
        threads += " AND thread_id = ?"
        params += (thread_id,)
    deleted = 0
    for table in CHECKPOINT_TABLES:
        cur = run(f"DELETE FROM {table} WHERE tenant = ? AND thread_id IN ({threads})", (scope.tenant, *params))
        deleted += max(cur.rowcount, 0)
    return deleted


def _has_checkpoints(run: Run, dialect: str) -> bool:
    if dialect == "postgresql":  # the store's schema is the connection's search_path
        return run("SELECT to_regclass('lg_checkpoints') IS NOT NULL", ()).fetchone()[0]
    return run("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'lg_checkpoints'", ()).fetchone() is not None


def sqlite_runner(db: sqlite3.Connection) -> Run:
    return lambda sql, params: db.execute(sql, params)


def postgres_runner(cur: Any) -> Run:
    def run(sql: str, params: tuple) -> Any:
        cur.execute(sql.replace("?", "%s"), params)
        return cur

    return run


# ---- the side database of a memory:// store -------------------------------------------------


class SideDatabase:
    """An in-memory SQLite database with one lock for its connection (a memory:// store's lg_* tables)."""

    dialect = "sqlite"

    def __init__(self) -> None:
        self.db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self.lock = threading.RLock()

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        from .sqlite import write_transaction

        with write_transaction(self.db, self.lock) as db:
            yield db

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        with self.lock:
            try:
                yield self.db
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite read failed: {exc}") from exc


#: one side database per memory:// store object, shared by every adapter over it, lost with it
_SIDE: weakref.WeakKeyDictionary[Any, SideDatabase] = weakref.WeakKeyDictionary()
_SIDE_LOCK = threading.Lock()


def side_database(store: Any, *, create: bool = True) -> SideDatabase | None:
    """The store's side database (made on first use; None if absent and ``create`` is False)."""
    with _SIDE_LOCK:
        if store not in _SIDE and create:
            _SIDE[store] = SideDatabase()
        return _SIDE.get(store)


def delete_side_checkpoints(store: Any, scope: Scope, *, thread_id: str | None = None) -> int:
    """``delete_checkpoints`` in a memory:// store's side database, if it has one."""
    side = side_database(store, create=False)
    if side is None:
        return 0
    with side.write() as db:
        return delete_checkpoints(sqlite_runner(db), "sqlite", scope, thread_id=thread_id)
