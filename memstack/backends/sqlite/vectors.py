"""SQLite vector index and embedding cache in the store's file: float32 BLOB rows, searched exactly
from a per-user numpy matrix cached in the process and checked against a per-user version.

Design, measured with ``bench/vector_latency.py`` (BENCHMARKS.md, "Vector search latency
(issue 3)", has the command and the figures):

- (a) this module: rows in an ordinary table; the user's rows as one float32 matrix in the
  process (``rules.matrix``). A filtered top-k is a boolean mask over integer-coded metadata
  columns plus one matrix-vector product on the calling thread: exact by construction. The first
  search of a user reads their rows; later ones check the user's version with one indexed read.
- (b) sqlite-vec (``vec0``, the user as partition key, metadata columns for the filters): also
  exact, but several times slower to search and to load. It also needs a second SQLite build
  (pysqlite3): the store's ``sqlite3`` connection cannot load extensions, so ``delete_user`` could
  not delete vec0 rows in its own transaction. (a) it is.

Memory: a cached user costs 4 x d bytes per vector plus about 200 bytes of Python per row; the
cache keeps the most recently searched users within ``cache_mb``. float16 would halve the matrix,
but numpy has no fast half-precision product (converting the rows to float32 costs more than the
float32 product itself), so it stays float32.

Consistency across processes: a trigger bumps the user's version (a number drawn from one counter
in ``vector_meta``, so it never repeats, even after ``delete_user`` removed the version row) in
the same transaction as any deletion, including the store's ``delete_user`` and
``delete_thread``; upserts bump it themselves. A search whose cached version differs reloads the
user; this process's own writes patch its cached matrix instead.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ...types import Scope, Scored, SearchFilter, Unit
from ..rules.matrix import UserVectors, user_key
from ..rules.time import epoch_us
from ..rules.vectors import cache_row, check_model, query_row, upsert_batch
from ..sql.dialect import SQLITE, chunks
from ..sql.where import deleted_vectors
from .database import Database

UserKey = tuple[str, str]


class _Matrices:
    """This process's copies of users' vectors, each tagged with the version it matches; the most
    recently used are kept within ``max_bytes`` (at least one, however large)."""

    def __init__(self, max_bytes: int) -> None:
        self.lock = threading.Lock()
        self._max_bytes = max_bytes
        self._entries: OrderedDict[UserKey, tuple[int, UserVectors]] = OrderedDict()

    def at(self, key: UserKey, version: int) -> UserVectors | None:
        """The cached matrix if it is at ``version`` (call with ``lock`` held)."""
        entry = self._entries.get(key)
        if entry is None or entry[0] != version:
            return None
        self._entries.move_to_end(key)
        return entry[1]

    def keep(self, key: UserKey, version: int, user: UserVectors) -> None:
        """Cache a freshly read matrix unless a newer one is cached (call with ``lock`` held)."""
        entry = self._entries.get(key)
        if entry is not None and entry[0] > version:
            return
        self._entries[key] = (version, user)
        self._entries.move_to_end(key)
        while len(self._entries) > 1 and sum(u.nbytes for _, u in self._entries.values()) > self._max_bytes:
            self._entries.popitem(last=False)

    def advance(self, key: UserKey, before: int | None, after: int | None, change: Callable[[UserVectors], object]) -> None:
        """After this process committed a write that moved the user from ``before`` to ``after``:
        patch the cached matrix if it was current, else forget it."""
        with self.lock:
            entry = self._entries.get(key)
            if entry is None:
                return
            if entry[0] != before or after is None:
                del self._entries[key]
                return
            change(entry[1])
            self._entries[key] = (after, entry[1])

    def forget(self, key: UserKey) -> None:
        with self.lock:
            self._entries.pop(key, None)

    def clear(self) -> None:
        with self.lock:
            self._entries.clear()


class SQLiteVectorIndex:
    """VectorIndex over the store's SQLite file; exact search from a per-user in-process matrix."""

    def __init__(self, db: Database, *, cache_mb: int = 1024) -> None:
        self._s = db
        self._cache = _Matrices(cache_mb * 2**20)

    # ---- writing -------------------------------------------------------------------------

    def upsert(self, units: Sequence[Unit], vectors: Any, *, model: str) -> None:
        units, rows = upsert_batch(units, vectors)
        if not units:
            return
        by_user: dict[UserKey, list[int]] = {}
        for i, u in enumerate(units):
            by_user.setdefault(user_key(u.scope), []).append(i)
        params = [
            (*u.scope.key, u.id, u.kind, u.category, epoch_us(u.timestamp), row.tobytes()) for u, row in zip(units, rows, strict=True)
        ]
        with self._s.write() as db:
            held_model, held_dimension = db.execute("SELECT model, dimension FROM vector_meta").fetchone()
            check_model(held_model, held_dimension, model, rows.shape[1])
            if held_model is None:
                db.execute("UPDATE vector_meta SET model = ?, dimension = ?", (model, rows.shape[1]))
            before = {key: self._version(db, key) for key in by_user}
            db.executemany(
                "INSERT INTO vectors (tenant, user_id, agent_id, thread_id, unit_id, kind, category, ts_us, vector) VALUES (?,?,?,?,?,?,?,?,?) "
                "ON CONFLICT (tenant, user_id, agent_id, unit_id) DO UPDATE SET thread_id = excluded.thread_id, kind = excluded.kind, "
                "category = excluded.category, ts_us = excluded.ts_us, vector = excluded.vector",
                params,
            )
            after = {key: self._bump(db, key) for key in by_user}
        for key, at in by_user.items():
            self._cache.advance(key, before[key], after[key], lambda user, at=at: user.put([units[i] for i in at], rows[at]))

    @staticmethod
    def _version(db: sqlite3.Connection, key: UserKey) -> int | None:
        row = db.execute("SELECT version FROM vector_versions WHERE tenant = ? AND user_id = ?", key).fetchone()
        return row[0] if row else None

    @staticmethod
    def _bump(db: sqlite3.Connection, key: UserKey) -> int:
        (version,) = db.execute("UPDATE vector_meta SET generation = generation + 1 RETURNING generation").fetchone()
        db.execute("INSERT OR REPLACE INTO vector_versions (tenant, user_id, version) VALUES (?, ?, ?)", (*key, version))
        return version

    def delete(self, scope: Scope, ids: Sequence[str] | None = None) -> int:
        key = user_key(scope)
        sql, params = deleted_vectors(SQLITE, scope, ids)
        with self._s.write() as db:
            before = self._version(db, key)
            if ids is None:
                deleted = db.execute(f"DELETE FROM vectors WHERE {sql}", params).rowcount
            else:
                deleted = sum(
                    db.execute(f"DELETE FROM vectors WHERE {sql} AND unit_id IN ({SQLITE.marks(len(c))})", [*params, *c]).rowcount
                    for c in chunks(ids)
                )
            after = self._version(db, key)
        self._cache.advance(key, before, after, lambda user: user.delete(scope, ids))
        return deleted

    def reset(self) -> None:
        with self._s.write() as db:
            db.execute("DELETE FROM vectors")
            db.execute("DELETE FROM vector_versions")
            db.execute("UPDATE vector_meta SET model = NULL, dimension = NULL, generation = generation + 1")
        self._cache.clear()

    # ---- reading -------------------------------------------------------------------------

    def search(self, scope: Scope, vector: Any, *, k: int, where: SearchFilter | None = None) -> list[Scored]:
        if k <= 0:
            return []
        return self._with_user(scope, lambda user, query: user.search(query, k, scope.agent_id, where), [], vector)

    def fetch(self, scope: Scope, ids: Sequence[str]) -> dict[str, Any]:
        if not ids:
            return {}
        return self._with_user(scope, lambda user, _query: user.fetch(scope.agent_id, ids), {})

    def _with_user(self, scope: Scope, read: Callable[[UserVectors, Any], Any], empty: Any, vector: Any = None) -> Any:
        """``read(rows, query)`` on the user's current rows (the cached matrix, or one read from the
        file and cached), under the cache's lock, with ``vector`` checked against the index's
        dimension and normalised (None without one); ``empty`` when the user has none."""
        key = user_key(scope)
        dimension, version = self._s.query(
            "SELECT dimension, (SELECT version FROM vector_versions WHERE tenant = ? AND user_id = ?) FROM vector_meta", key
        )[0]
        if dimension is None:
            return empty
        query = None if vector is None else query_row(vector, dimension)  # a wrong dimension raises, even for a user with no vectors
        if version is None:  # the user has no vectors
            self._cache.forget(key)
            return empty
        with self._cache.lock:
            user = self._cache.at(key, version)
            if user is not None:
                return read(user, query)
        version, user = self._read_user(key)
        with self._cache.lock:
            if user.dimension == dimension:  # else a reset and a new model came between the two reads
                self._cache.keep(key, version, user)
            return read(user, query) if user.dimension == dimension else empty

    def _read_user(self, key: UserKey) -> tuple[int, UserVectors]:
        """The user's version and rows, read in one snapshot."""
        s = self._s
        with s.snapshot():
            dimension, version = s.query(
                "SELECT dimension, (SELECT version FROM vector_versions WHERE tenant = ? AND user_id = ?) FROM vector_meta", key
            )[0]
            rows = s.query(
                "SELECT agent_id, thread_id, kind, category, ts_us, unit_id, vector FROM vectors WHERE tenant = ? AND user_id = ?", key
            )
        if not rows or dimension is None:
            return version or 0, UserVectors(dimension or 0)
        agents, threads, kinds, categories, ts_us, ids, blobs = zip(*rows, strict=True)
        matrix = np.frombuffer(b"".join(blobs), np.float32).reshape(len(rows), dimension)
        return version, UserVectors.from_columns(matrix, agents, threads, kinds, categories, ts_us, ids)

    def info(self) -> tuple[str | None, int | None, int]:
        model, dimension = self._s.query("SELECT model, dimension FROM vector_meta")[0]
        return model, dimension, self._s.query("SELECT count(*) FROM vectors")[0][0]


class SQLiteEmbeddingCache:
    """EmbeddingCache in the store's file: float32 BLOBs keyed by scope, model and text hash."""

    def __init__(self, db: Database) -> None:
        self._s = db

    def get(self, scope: Scope, model: str, hashes: Sequence[str]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for chunk in chunks(hashes):
            rows = self._s.query(
                f"SELECT hash, vector FROM embedding_cache WHERE tenant = ? AND user_id = ? AND agent_id = ? AND thread_id = ? AND model = ? "
                f"AND hash IN ({SQLITE.marks(len(chunk))})",
                (*scope.key, model, *chunk),
            )
            found.update({h: np.frombuffer(blob, np.float32).copy() for h, blob in rows})
        return found

    def put(self, scope: Scope, model: str, vectors: Mapping[str, Any]) -> None:
        params = [(*scope.key, model, h, cache_row(v).tobytes()) for h, v in vectors.items()]
        with self._s.write() as db:
            db.executemany("INSERT OR REPLACE INTO embedding_cache VALUES (?,?,?,?,?,?,?)", params)

    def delete(self, scope: Scope) -> int:
        sql, params = deleted_vectors(SQLITE, scope, None)
        with self._s.write() as db:
            return db.execute(f"DELETE FROM embedding_cache WHERE {sql}", params).rowcount
