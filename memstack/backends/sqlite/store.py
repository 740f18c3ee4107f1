"""The SQLite store, the embedded default: every store in one WAL-mode file (``database``), its
schema made by one ordered list of migrations (``migrations``).

Each part is a module of its own, over the store's one connection: ``history``, ``documents``
(state, profiles, checkpoints), ``jobs``, ``records``, ``units``, ``vectors``; the store itself
deletes a user across all of their tables in one transaction and keeps the notes of deletions.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from ...errors import StoreError
from ...types import Deletion, Expiry, Scope
from ..rules.deletions import counted_as, tally
from ..sql.adapter_rows import delete_checkpoints
from ..sql.deletions import held_key, noted_tenants_query, restore_notes
from ..sql.dialect import SQLITE
from ..sql.expiry import expire
from ..sql.records import SQLUsage
from ..sql.tenants import tenants_query
from .database import Database
from .deletions import read_deletions, record_deletion
from .documents import SQLiteCheckpoints, SQLiteProfiles, SQLiteState
from .history import SQLiteHistory
from .jobs import SQLiteJobs
from .migrations import USER_TABLES, apply_migrations
from .records import SQLiteRecords
from .units import SQLiteUnits
from .vectors import SQLiteEmbeddingCache, SQLiteVectorIndex


class SQLiteStore:
    """All four stores over one SQLite file (``":memory:"`` for a private in-process database).

    Its ``write``, ``query`` and ``snapshot`` are its database's, so that a part made over the store
    itself (``SQLiteVectorIndex(store)``) works as one made over the database."""

    def __init__(self, path: str | Path, *, timeout: float = 30.0, synchronous: str = "NORMAL") -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).expanduser().parent.mkdir(parents=True, exist_ok=True)
        self.url = f"sqlite:///{self.path}"
        self._database = db = Database(self.path, timeout=timeout, synchronous=synchronous)
        try:
            apply_migrations(db.connection)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite database {self.path}: {exc}") from exc
        self.history = SQLiteHistory(db)
        self.state = SQLiteState(db)
        self.checkpoints = SQLiteCheckpoints(db)
        self.jobs = SQLiteJobs(db)
        self.profiles = SQLiteProfiles(db)
        self.units = SQLiteUnits(db)
        self.vectors = SQLiteVectorIndex(db)
        self.embeddings = SQLiteEmbeddingCache(db)
        self.records = SQLiteRecords(db)
        self.usage = SQLUsage(SQLITE, lambda _doing: db.write(), db.query)

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (BEGIN IMMEDIATE: the file's write lock is taken up front)."""
        with self._database.write() as db:
            yield db

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        return self._database.query(sql, params)

    def snapshot(self) -> AbstractContextManager[None]:
        """Reads under one read transaction (see ``Database.snapshot``)."""
        return self._database.snapshot()

    def delete_user(self, scope: Scope, *, layer: str = "library") -> int:
        with self.write() as db:
            user = (scope.tenant, scope.user_id)
            counts = [(counted_as(t), db.execute(f"DELETE FROM {t} WHERE {SQLITE.user}", user).rowcount) for t in USER_TABLES]
            counts.append(("other", delete_checkpoints(db.execute, SQLITE, scope)))  # the LangGraph saver's, if any
            return record_deletion(db, scope.user(), "user", tally(counts), layer=layer).rows

    def expire(self, tenant: str, expiry: Expiry, *, layer: str = "retention") -> list[Deletion]:
        """Delete what of the tenant ``expiry`` says is too old, one transaction and note per user."""
        return expire(lambda _doing: self.write(), SQLITE, tenant, expiry, record_deletion, layer=layer)

    def note_deletion(self, scope: Scope, kind: str, counts: Mapping[str, int], *, layer: str, name: str | None = None) -> Deletion:
        """Note a deletion made outside delete_user and delete_thread (a saved memory's)."""
        with self.write() as db:
            return record_deletion(db, scope, kind, counts, layer=layer, name=name)

    def tenants(self) -> list[str]:
        return [row[0] for row in self._database.query(tenants_query(SQLITE))]

    def deletions(self, tenant: str, *, user_id: str | None = None) -> list[Deletion]:
        """The tenant's deletion notes (of one user: ``user_id``), oldest first."""
        return read_deletions(self._database, tenant, user_id)

    def noted_tenants(self) -> list[str]:
        return [row[0] for row in self._database.query(noted_tenants_query(SQLITE))]

    def deletion_key(self) -> bytes | None:
        """The key of the deletion notes' hashes (None: nothing deleted yet); a secret."""
        with self.write() as db:
            return held_key(db.execute, SQLITE)

    def restore_deletions(self, key: bytes, notes: Sequence[Deletion]) -> int:
        """Store notes made under ``key`` verbatim, adopting it (``rules.deletions.adopts``), in one transaction."""
        with self.write() as db:
            return restore_notes(db.execute, SQLITE, key, notes)

    def close(self) -> None:
        self._database.close()
