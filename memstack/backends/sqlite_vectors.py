"""SQLite vector index and embedding cache, in the store's file. PLACEHOLDER: being written."""

from __future__ import annotations

VECTOR_MIGRATIONS: list = []
VECTOR_TABLES: list[str] = []


class SQLiteVectorIndex:
    def __init__(self, store) -> None:
        self._s = store


class SQLiteEmbeddingCache:
    def __init__(self, store) -> None:
        self._s = store
