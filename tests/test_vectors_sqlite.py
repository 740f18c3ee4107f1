"""The SQLite vector index and embedding cache pass the contracts, see other processes' writes,
and are cleared by the store's delete_user and delete_thread."""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest

from memstack.backends.sqlite import SQLiteStore
from memstack.backends.sqlite.vectors import SQLiteVectorIndex
from memstack.testing import A2, AGENT, A, B, EmbeddingCacheContract, VectorIndexContract
from memstack.testing.vectors import MODEL, axis, ids, unit
from memstack.types import Scope


@pytest.fixture
def path(tmp_path):
    return tmp_path / "memstack.db"


class TestSQLiteVectorIndex(VectorIndexContract):
    @pytest.fixture(autouse=True)
    def _path(self, path):
        self.path = path

    def new_index(self):
        return SQLiteStore(self.path).vectors

    def close(self, index):
        index._s.close()


class TestSQLiteVectorIndexReopened(VectorIndexContract):
    """Every search reads the file afresh: a second store on the same file does the writes."""

    @pytest.fixture(autouse=True)
    def _path(self, path):
        self.path = path

    def new_index(self):
        return TwoStores(self.path)

    def close(self, index):
        index.close()


class TwoStores:
    """Writes through one store and searches through another, as two processes would."""

    def __init__(self, path) -> None:
        self.writer, self.reader = SQLiteStore(path), SQLiteStore(path)

    def upsert(self, *args, **kwargs):
        return self.writer.vectors.upsert(*args, **kwargs)

    def delete(self, *args, **kwargs):
        return self.writer.vectors.delete(*args, **kwargs)

    def reset(self):
        return self.writer.vectors.reset()

    def search(self, *args, **kwargs):
        return self.reader.vectors.search(*args, **kwargs)

    def fetch(self, *args, **kwargs):
        return self.reader.vectors.fetch(*args, **kwargs)

    def info(self):
        return self.reader.vectors.info()

    def close(self):
        self.writer.close()
        self.reader.close()


class TestSQLiteEmbeddingCache(EmbeddingCacheContract):
    @pytest.fixture(autouse=True)
    def _path(self, path):
        self.path = path

    def new_cache(self):
        return SQLiteStore(self.path).embeddings

    def close(self, cache):
        cache._s.close()


def test_cached_matrix_follows_other_writers(path):
    mine, theirs = SQLiteStore(path), SQLiteStore(path)
    mine.vectors.upsert([unit("u1"), unit("u2")], [axis(0), axis(1)], model=MODEL)
    assert ids(mine.vectors.search(A, axis(0), k=5)) == ["u1", "u2"]  # now cached
    theirs.vectors.upsert([unit("u3")], [axis(0)], model=MODEL)
    assert ids(mine.vectors.search(A, axis(0), k=5)) == ["u1", "u3", "u2"]
    theirs.vectors.delete(A, ["u1"])
    assert ids(mine.vectors.search(A, axis(0), k=5)) == ["u3", "u2"]
    mine.vectors.upsert([unit("u4")], [axis(0)], model=MODEL)  # patches the cached matrix
    assert ids(mine.vectors.search(A, axis(0), k=5)) == ["u3", "u4", "u2"]
    theirs.delete_user(A)
    assert mine.vectors.search(A, axis(0), k=5) == []
    theirs.vectors.reset()
    theirs.vectors.upsert([unit("u9")], [axis(0, 4)], model="other")
    assert ids(mine.vectors.search(A, axis(0, 4), k=5)) == ["u9"]
    mine.close()
    theirs.close()


def test_store_delete_thread_and_user_clear_vectors_and_cache(path):
    store = SQLiteStore(path)
    units = [unit("a", A), unit("b", A2), unit("c", AGENT), unit("a", B)]
    store.vectors.upsert(units, [axis(i) for i in range(4)], model=MODEL)
    for sc in (A, A2, AGENT, B):
        store.embeddings.put(sc, MODEL, {"h": [1.0, 2.0]})
    assert ids(store.vectors.search(A, axis(0), k=9)) == ["a", "b", "c"]  # cached before the deletes
    store.history.delete_thread(A)
    assert sorted(ids(store.vectors.search(A, axis(0), k=9))) == ["b", "c"]
    assert store.embeddings.get(A, MODEL, ["h"]) == {} and store.embeddings.get(A2, MODEL, ["h"]) != {}
    store.delete_user(A)
    assert store.vectors.search(A, axis(0), k=9) == []
    assert all(store.embeddings.get(sc, MODEL, ["h"]) == {} for sc in (A2, AGENT))
    assert ids(store.vectors.search(B, axis(3), k=9)) == ["a"] and store.embeddings.get(B, MODEL, ["h"]) != {}
    left = store.query("SELECT count(*) FROM vector_versions WHERE user_id = ?", (A.user_id,))[0][0]
    assert left == 0  # no trace of the user
    store.close()


def _upsert_many(path: str, worker: int) -> None:
    store = SQLiteStore(path)
    rng = np.random.default_rng(worker)
    for i in range(40):
        store.vectors.upsert([unit(f"w{worker}-{i}")], rng.standard_normal((1, 8)), model=MODEL)
        store.vectors.search(A, rng.standard_normal(8), k=3)
    store.close()


def test_processes_write_one_user_concurrently(path):
    SQLiteStore(path).close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_upsert_many, args=(str(path), w)) for w in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    store = SQLiteStore(path)
    assert len(store.vectors.search(A, axis(0), k=500)) == 120
    store.close()


def test_cache_is_bounded_by_bytes(path):
    store = SQLiteStore(path)
    index = SQLiteVectorIndex(store, cache_mb=0)
    for user in ("u1", "u2"):
        index.upsert([unit("x", Scope(user_id=user, thread_id="t"))], [axis(0)], model=MODEL)
        index.search(Scope(user_id=user), axis(0), k=1)
    assert list(index._cache._entries) == [("default", "u2")]  # the most recent is kept, however large
    store.close()
