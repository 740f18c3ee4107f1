"""The in-memory numpy index and embedding cache pass the contracts and are safe across threads."""

from __future__ import annotations

import threading

import numpy as np

from memstack.backends.memory.vectors import MemoryEmbeddingCache, NumpyVectorIndex
from memstack.testing import A, EmbeddingCacheContract, VectorIndexContract
from memstack.testing.vectors import MODEL, axis, unit


class TestNumpyVectorIndex(VectorIndexContract):
    def new_index(self) -> NumpyVectorIndex:
        return NumpyVectorIndex()


class TestMemoryEmbeddingCache(EmbeddingCacheContract):
    def new_cache(self) -> MemoryEmbeddingCache:
        return MemoryEmbeddingCache()


def test_concurrent_upserts_deletes_and_searches_stay_consistent() -> None:
    index = NumpyVectorIndex()
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        try:
            for i in range(200):
                index.upsert([unit(f"w{w}-{i}")], [axis(i % 8)], model=MODEL)
                if i % 3 == 0:
                    index.delete(A, [f"w{w}-{i}"])
                index.search(A, axis(0), k=5)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert index.info()[2] == 4 * (200 - 67)
    got = index.search(A, axis(0), k=1000)
    assert len(got) == 4 * (200 - 67) and len({r.id for r in got}) == len(got)
    assert np.isclose(got[0].score, 1.0)
