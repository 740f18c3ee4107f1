"""One SQLite connection in WAL mode, shared by a store's parts: its lock, write transactions and
reads, with SQLite's errors raised as StoreError.

Writes run in ``BEGIN IMMEDIATE`` transactions (``sql.transaction``) with a busy timeout, so
several processes can write the same file: each waits for the file's write lock, up to
``timeout`` seconds. Reads take the connection's lock only.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ...errors import StoreError
from ..sql.transaction import write_transaction


class Database:
    """The connection to ``path`` (``":memory:"`` for a private in-process database)."""

    def __init__(self, path: str, *, timeout: float, synchronous: str) -> None:
        self.path = path
        self.lock = threading.RLock()
        try:
            self.connection = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
            self.connection.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            self.connection.execute("PRAGMA journal_mode = WAL")
            self.connection.execute(f"PRAGMA synchronous = {synchronous}")
            self.connection.execute("PRAGMA foreign_keys = ON")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite database {path}: {exc}") from exc

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (BEGIN IMMEDIATE: the file's write lock is taken up front)."""
        with write_transaction(self.connection, self.lock) as db:
            yield db

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        with self.lock:
            try:
                return self.connection.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite read failed: {exc}") from exc

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads under one read transaction (the same state of the file for all of them)."""
        with self.lock:
            self.query("BEGIN")
            try:
                yield
            finally:
                self.query("COMMIT")

    def close(self) -> None:
        with self.lock:
            self.connection.close()
