"""The side database of a ``memory://`` store: where the framework adapters keep their ``lg_*``
tables (``integrations.tables``), an in-memory SQLite database per store object, lost with it.

The store's ``delete_user`` and ``delete_thread`` reach it through ``delete_side_checkpoints``,
as the SQL backends reach their own ``lg_*`` tables (``sql.adapter_rows``).
"""

from __future__ import annotations

import sqlite3
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ...errors import StoreError
from ...types import Scope
from ..sql.adapter_rows import delete_checkpoints
from ..sql.dialect import SQLITE
from ..sql.transaction import write_transaction


class SideDatabase:
    """An in-memory SQLite database with one lock for its connection (a memory:// store's lg_* tables)."""

    dialect = "sqlite"

    def __init__(self) -> None:
        self.db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self.lock = threading.RLock()

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
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
        return delete_checkpoints(db.execute, SQLITE, scope, thread_id=thread_id)
