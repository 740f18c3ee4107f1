"""The pgvector index and embedding cache pass the contracts, use HNSW where it pays, and are
cleared by the store's delete_user and delete_thread.

Needs a server with pgvector: set MEMSTACK_TEST_PG_DSN (e.g. postgresql://postgres@127.0.0.1:5433/postgres,
as printed by scripts/postgres.sh). Without it the module is skipped, except under CI, where a
missing server is a failure. Every test works in a fresh random schema, dropped afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from pgsupport import require_dsn

from memstack.testing import A2, AGENT, A, B, EmbeddingCacheContract, VectorIndexContract
from memstack.testing.vectors import MODEL, axis, brute_force, ids, unit
from memstack.types import SearchFilter

DSN = require_dsn("vector")

psycopg = pytest.importorskip("psycopg")
from memstack.backends.postgres import PostgresStore  # noqa: E402
from memstack.backends.postgres.vectors import PgVectorIndex  # noqa: E402

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg(schema: str) -> Iterator[PostgresStore]:
    store = PostgresStore(DSN, schema=schema, max_size=2)
    yield store
    store.close()


class TestPgVectorIndex(VectorIndexContract):
    @pytest.fixture(autouse=True)
    def _store(self, pg):
        self.store = pg

    def new_index(self):
        return self.store.vectors


class TestPgVectorIndexThroughHnsw(VectorIndexContract):
    """The HNSW path for every search (exact_below=0): small sets still come back exact."""

    @pytest.fixture(autouse=True)
    def _store(self, pg):
        self.store = pg

    def new_index(self):
        return PgVectorIndex(self.store._db, exact_below=0)


class TestPgEmbeddingCache(EmbeddingCacheContract):
    @pytest.fixture(autouse=True)
    def _store(self, pg):
        self.store = pg

    def new_cache(self):
        return self.store.embeddings


def plan(pg: PostgresStore, sql: str) -> str:
    with pg._db.transaction("explaining") as cur:
        cur.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)")
        cur.execute("EXPLAIN " + sql)
        return "\n".join(r[0] for r in cur.fetchall())


def test_first_upsert_fixes_the_column_and_builds_hnsw(pg):
    pg.vectors.upsert([unit("u1")], [axis(0)], model=MODEL)
    with pg._db.transaction("inspecting") as cur:
        cur.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'memstack_vectors'::regclass AND attname = 'embedding'"
        )
        assert cur.fetchone()[0].endswith("vector(8)")
        cur.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'memstack_vectors_hnsw' AND schemaname = current_schema()")
        assert "hnsw" in cur.fetchone()[0]
    pg.vectors.reset()
    with pg._db.transaction("inspecting") as cur:
        cur.execute("SELECT count(*) FROM pg_indexes WHERE indexname = 'memstack_vectors_hnsw' AND schemaname = current_schema()")
        assert cur.fetchone()[0] == 0


def test_hnsw_recall_on_many_rows_of_one_user(pg):
    """2,000 rows through the HNSW path (exact_below=0) find at least 95% of the exact top 10."""
    rng = np.random.default_rng(3)
    units = [unit(f"r{i:04d}", A.thread(f"t{i % 3}"), category=("work", "home")[i % 2]) for i in range(2000)]
    rows = rng.standard_normal((2000, 8))
    pg.vectors.upsert(units, rows, model=MODEL)
    approximate = PgVectorIndex(pg._db, exact_below=0)
    with pg._db.transaction("analyzing") as cur:
        cur.execute("ANALYZE memstack_vectors")
    hits = total = 0
    for n, query in enumerate(rng.standard_normal((20, 8))):
        where = SearchFilter(categories=("home",)) if n % 2 else None
        want = set(ids(brute_force(units, rows, A, query, 10, where)))
        got = approximate.search(A, query, k=10, where=where)
        assert len(got) == 10
        hits += len(want & set(ids(got)))
        total += 10
    assert hits / total >= 0.95
    sql = "SELECT unit_id FROM memstack_vectors WHERE tenant = 'default' AND user_id = 'user_001' ORDER BY embedding OPERATOR(public.<=>) '[1,0,0,0,0,0,0,0]' LIMIT 10"
    assert "_embedding_idx" in plan(pg, sql)  # the HNSW index of the user's partition


def test_store_delete_thread_and_user_clear_vectors_and_cache(pg):
    units = [unit("a", A), unit("b", A2), unit("c", AGENT), unit("a", B)]
    pg.vectors.upsert(units, [axis(i) for i in range(4)], model=MODEL)
    for sc in (A, A2, AGENT, B):
        pg.embeddings.put(sc, MODEL, {"h": [1.0, 2.0]})
    pg.history.delete_thread(A)
    assert sorted(ids(pg.vectors.search(A, axis(0), k=9))) == ["b", "c"]
    assert pg.embeddings.get(A, MODEL, ["h"]) == {} and pg.embeddings.get(A2, MODEL, ["h"]) != {}
    pg.delete_user(A)
    assert pg.vectors.search(A, axis(0), k=9) == []
    assert all(pg.embeddings.get(sc, MODEL, ["h"]) == {} for sc in (A2, AGENT))
    assert ids(pg.vectors.search(B, axis(3), k=9)) == ["a"] and pg.embeddings.get(B, MODEL, ["h"]) != {}
    assert pg.vectors.info() == (MODEL, 8, 1)
