"""pgvector index and embedding cache: unit vectors hash-partitioned by user, each partition with
its own HNSW graph (cosine), searched per user with the SearchFilter in SQL; exact when few match.

- Partitions: ``memstack_vectors`` is split into 32 hash partitions on (tenant, user_id)
  (``migrations``), so a user's search prunes to one partition and walks a graph 32 times smaller
  in which that user's rows are far denser. HNSW filters after walking the graph, so a filtered
  search costs more the more rows the filter rejects: one graph over the whole table was an order
  of magnitude slower for filtered searches, at lower recall.
- Dimension: the ``embedding`` column is created as plain ``vector``; the first upsert fixes
  (model, dimension) in ``memstack_vector_meta``, turns the column into ``vector(d)`` and builds
  the HNSW index (``vector_cosine_ops``; HNSW needs a fixed dimension, at most 2,000). ``reset``
  drops the index and rows and makes the column dimensionless again, in one transaction.
- Search: one statement reads the dimension and counts the matching rows up to ``exact_below``
  (an index-only count on the covering scope index). Fewer matches: exact search, ordered by an
  expression the HNSW index cannot serve, so PostgreSQL scores every matching row. More: the
  HNSW index with ``hnsw.iterative_scan = relaxed_order`` (else a filtered scan stops at
  ``ef_search`` candidates and returns too few rows) and ``hnsw.ef_search = max(100, 2k)``, set
  for this transaction only; the rows are re-sorted, and if fewer than k come back the exact
  search runs instead.
- Why 2,000 and 100 (``bench/vector_latency.py``; BENCHMARKS.md, "Vector search latency (issue
  3)", has the command and the figures): exact search costs in proportion to the matching rows,
  the HNSW path about the same for any user; forced through HNSW, a small user lost recall, so
  below 2,000 rows search is exact; ef_search 100 gave better recall than 40 for little more time.
- Server settings matter: ``shared_buffers`` should hold the HNSW indexes; with the default
  128 MB, a filtered search reads graph pages from the OS and is far slower.
- pgvector may live in any schema (the store's connections search only the store's schema), so
  its type, operator and operator class are written schema-qualified.
- Vectors travel as pgvector's text form ('[x,y,...]', each float32 written exactly).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ...types import Scope, Scored, SearchFilter, Unit
from ..rules.vectors import best_first, cache_row, check_model, query_row, score, upsert_batch
from ..sql.dialect import POSTGRES
from ..sql.where import deleted_vectors, with_agent
from ..sql.where import filters as where_filters
from .database import Database, extension_schema

if TYPE_CHECKING:
    from psycopg import Cursor

EXACT_BELOW = 2_000  # matching rows under which search is exact (see the module docstring)
HNSW_MAX_DIMENSION = 2000
MIN_EF_SEARCH = 100
MAX_EF_SEARCH = 1000


def vector_text(row: np.ndarray) -> str:
    """pgvector's text form of a float32 row; every value round-trips exactly."""
    return "[" + ",".join(map(repr, row.tolist())) + "]"


def scope_condition(scope: Scope, ids: Sequence[str] | None = None) -> tuple[str, list[Any]]:
    """WHERE text for a deletion: ids in the user (and agent), else the exact thread, else the user."""
    sql, params = deleted_vectors(POSTGRES, scope, ids)
    if ids is not None:
        condition, id_params = POSTGRES.any_of("unit_id", ids)
        return f"{sql} AND {condition}", params + id_params
    return sql, params


def search_condition(scope: Scope, where: SearchFilter | None) -> tuple[str, list[Any]]:
    """WHERE text for a search: the tenant and user, the agent if named, and the filter."""
    sql, params = with_agent(POSTGRES, POSTGRES.user, scope)
    filters, filter_params = where_filters(POSTGRES, where)
    return (f"{sql} AND {filters}", params + filter_params) if filters else (sql, params)


class PgVectorIndex:
    """VectorIndex in PostgreSQL with pgvector; exact below ``exact_below`` matching rows, HNSW above."""

    def __init__(self, db: Database, *, exact_below: int = EXACT_BELOW) -> None:
        self._db = db
        self._exact_below = exact_below
        self._ext: str | None = None

    def _extension(self, cur: Cursor[Any]) -> str:
        if self._ext is None:
            self._ext = extension_schema(cur)
        return self._ext

    def _lock_meta(self, cur: Cursor[Any]) -> None:
        """Serialise fixing and dropping the model (first upsert, reset) in this schema."""
        cur.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", ("memstack.vectors\x1f" + self._db.schema,))

    # ---- writing -------------------------------------------------------------------------

    def upsert(self, units: Sequence[Unit], vectors: Any, *, model: str) -> None:
        units, rows = upsert_batch(units, vectors)
        if not units:
            return
        params = [(*u.scope.key, u.id, u.kind, u.category, u.timestamp, vector_text(row)) for u, row in zip(units, rows, strict=True)]
        with self._db.transaction("storing vectors") as cur:
            ext = self._extension(cur)
            self._hold_model(cur, ext, model, rows.shape[1])
            cur.executemany(
                f"""INSERT INTO memstack_vectors (tenant, user_id, agent_id, thread_id, unit_id, kind, category, ts, embedding)
                    VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s::{ext}.vector)
                    ON CONFLICT (tenant, user_id, agent_id, unit_id) DO UPDATE SET thread_id = excluded.thread_id,
                        kind = excluded.kind, category = excluded.category, ts = excluded.ts, embedding = excluded.embedding""",
                params,
            )

    def _hold_model(self, cur: Cursor[Any], ext: str, model: str, dimension: int) -> None:
        """Check the held model, or fix it (column type and HNSW index) if none is held."""
        cur.execute("SELECT model, dimension FROM memstack_vector_meta FOR SHARE")
        row = cur.fetchone()
        if row is None:
            self._lock_meta(cur)
            cur.execute("SELECT model, dimension FROM memstack_vector_meta")
            row = cur.fetchone()
        if row is not None:
            check_model(row[0], row[1], model, dimension)
            return
        check_model(None, None, model, dimension)
        cur.execute("INSERT INTO memstack_vector_meta (model, dimension) VALUES (%s, %s)", (model, dimension))
        cur.execute(f"ALTER TABLE memstack_vectors ALTER COLUMN embedding TYPE {ext}.vector({int(dimension)})")
        if dimension <= HNSW_MAX_DIMENSION:
            cur.execute(f"CREATE INDEX memstack_vectors_hnsw ON memstack_vectors USING hnsw (embedding {ext}.vector_cosine_ops)")

    def delete(self, scope: Scope, ids: Sequence[str] | None = None) -> int:
        condition, params = scope_condition(scope, ids)
        with self._db.transaction("deleting vectors") as cur:
            cur.execute(f"DELETE FROM memstack_vectors WHERE {condition}", params)
            return cur.rowcount

    def reset(self) -> None:
        with self._db.transaction("resetting the vector index") as cur:
            ext = self._extension(cur)
            self._lock_meta(cur)
            cur.execute("DELETE FROM memstack_vector_meta")
            cur.execute("DROP INDEX IF EXISTS memstack_vectors_hnsw")
            cur.execute("TRUNCATE memstack_vectors")
            cur.execute(f"ALTER TABLE memstack_vectors ALTER COLUMN embedding TYPE {ext}.vector")

    # ---- reading -------------------------------------------------------------------------

    def search(self, scope: Scope, vector: Any, *, k: int, where: SearchFilter | None = None) -> list[Scored]:
        if k <= 0:
            return []
        condition, params = search_condition(scope, where)
        bound = max(self._exact_below, k)
        with self._db.transaction("searching vectors") as cur:
            ext = self._extension(cur)
            cur.execute(
                f"""SELECT m.dimension, (SELECT count(*) FROM (SELECT 1 FROM memstack_vectors WHERE {condition} LIMIT %s) AS matching)
                    FROM memstack_vector_meta AS m""",
                [*params, bound],
            )
            row = cur.fetchone()
            if row is None:
                return []
            query = vector_text(query_row(vector, row[0]))
            if row[1] == 0:
                return []
            if row[1] >= bound:
                found = self._approximate(cur, ext, condition, params, query, k)
                if len(found) >= k:
                    return found
            return self._exact(cur, ext, condition, params, query, k)

    def fetch(self, scope: Scope, ids: Sequence[str]) -> dict[str, Any]:
        if not ids:
            return {}
        user, wanted = [scope.tenant, scope.user_id], list(dict.fromkeys(ids))
        if scope.agent_id is not None:
            agents, params = "agent_id = %s", [*user, scope.agent_id]
        else:
            # the user's agents by a skip scan of the primary key (one seek each), so that the ids
            # are seeks too; "unit_id = ANY" under an unknown agent would read the user's whole range
            agents = """agent_id = ANY(ARRAY(WITH RECURSIVE a(agent_id) AS (
                    (SELECT agent_id FROM memstack_vectors WHERE tenant = %s AND user_id = %s ORDER BY agent_id LIMIT 1)
                    UNION ALL
                    SELECT (SELECT v.agent_id FROM memstack_vectors AS v WHERE v.tenant = %s AND v.user_id = %s AND v.agent_id > a.agent_id ORDER BY v.agent_id LIMIT 1)
                    FROM a WHERE a.agent_id IS NOT NULL
                ) SELECT agent_id FROM a WHERE agent_id IS NOT NULL))"""
            params = [*user, *user, *user]
        with self._db.transaction("reading vectors") as cur:
            ext = self._extension(cur)
            # pgvector's binary form (int16 dimension, int16 unused, big-endian float4s): no text parsing
            cur.execute(
                f"SELECT unit_id, {ext}.vector_send(embedding) FROM memstack_vectors WHERE tenant = %s AND user_id = %s AND {agents} AND unit_id = ANY(%s)",
                [*params, wanted],
            )
            return {unit_id: np.frombuffer(blob, ">f4", offset=4).astype(np.float32) for unit_id, blob in cur.fetchall()}

    @staticmethod
    def _exact(cur: Cursor[Any], ext: str, condition: str, params: list[Any], query: str, k: int) -> list[Scored]:
        """Score every matching row (the ORDER BY is not the indexed distance, so no HNSW)."""
        cur.execute(
            f"""SELECT unit_id, 1 - (embedding OPERATOR({ext}.<=>) %s::{ext}.vector) AS cos FROM memstack_vectors WHERE {condition}
                ORDER BY cos DESC, unit_id COLLATE "C" LIMIT %s""",
            [query, *params, k],
        )
        return [Scored(unit_id, score(cos)) for unit_id, cos in cur.fetchall()]

    @staticmethod
    def _approximate(cur: Cursor[Any], ext: str, condition: str, params: list[Any], query: str, k: int) -> list[Scored]:
        """The HNSW index, scanned on until k rows pass the filter; re-sorted, ties by id."""
        cur.execute(
            "SELECT set_config('hnsw.ef_search', %s, true), set_config('hnsw.iterative_scan', 'relaxed_order', true)",
            (str(min(MAX_EF_SEARCH, max(MIN_EF_SEARCH, 2 * k))),),
        )
        cur.execute(
            f"""SELECT unit_id, 1 - (embedding OPERATOR({ext}.<=>) %s::{ext}.vector) AS cos FROM memstack_vectors WHERE {condition}
                ORDER BY embedding OPERATOR({ext}.<=>) %s::{ext}.vector LIMIT %s""",
            [query, *params, query, k],
        )
        return best_first(((unit_id, score(cos)) for unit_id, cos in cur.fetchall()), k)

    def info(self) -> tuple[str | None, int | None, int]:
        with self._db.transaction("reading vector index info") as cur:
            cur.execute("SELECT model, dimension FROM memstack_vector_meta")
            meta = cur.fetchone() or (None, None)
            cur.execute("SELECT count(*) FROM memstack_vectors")
            row = cur.fetchone()
            return meta[0], meta[1], row[0] if row else 0


class PgEmbeddingCache:
    """EmbeddingCache in PostgreSQL: float32 bytes keyed by scope, model and text hash."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def get(self, scope: Scope, model: str, hashes: Sequence[str]) -> dict[str, Any]:
        if not hashes:
            return {}
        with self._db.transaction("reading cached embeddings") as cur:
            cur.execute(
                """SELECT hash, vector FROM memstack_embedding_cache
                   WHERE tenant = %s AND user_id = %s AND agent_id = %s AND thread_id = %s AND model = %s AND hash = ANY(%s)""",
                (*scope.key, model, list(hashes)),
            )
            return {h: np.frombuffer(blob, "<f4").astype(np.float32) for h, blob in cur.fetchall()}

    def put(self, scope: Scope, model: str, vectors: Mapping[str, Any]) -> None:
        params = [(*scope.key, model, h, cache_row(v).astype("<f4").tobytes()) for h, v in vectors.items()]
        with self._db.transaction("caching embeddings") as cur:
            cur.executemany(
                """INSERT INTO memstack_embedding_cache (tenant, user_id, agent_id, thread_id, model, hash, vector)
                   VALUES (%s, %s, %s, %s, %s, %s, %s)
                   ON CONFLICT (tenant, user_id, agent_id, thread_id, model, hash) DO UPDATE SET vector = excluded.vector""",
                params,
            )

    def delete(self, scope: Scope) -> int:
        condition, params = scope_condition(scope)
        with self._db.transaction("deleting cached embeddings") as cur:
            cur.execute(f"DELETE FROM memstack_embedding_cache WHERE {condition}", params)
            return cur.rowcount
