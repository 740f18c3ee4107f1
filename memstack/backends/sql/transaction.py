"""SQLite's write transaction on a sqlite3 connection, for every SQLite database memstack writes:
the SQLite backend's file and the memory backend's side database (``memory.side``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ...errors import StoreError


@contextmanager
def write_transaction(db: sqlite3.Connection, lock: Any) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE ... COMMIT on ``db`` under ``lock`` (the file's write lock is taken up front,
    so no other writer comes between a read and a write); rolled back on any error, SQLite's own
    errors raised as StoreError."""
    with lock:
        try:
            db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite write failed: {exc}") from exc
        try:
            yield db
        except sqlite3.Error as exc:
            db.execute("ROLLBACK")
            raise StoreError(f"SQLite write failed: {exc}") from exc
        except BaseException:
            db.execute("ROLLBACK")
            raise
        else:
            db.execute("COMMIT")
