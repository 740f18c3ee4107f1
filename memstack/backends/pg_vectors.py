"""pgvector index (HNSW) and embedding cache. PLACEHOLDER: being written."""

from __future__ import annotations

VECTOR_MIGRATIONS: list = []
VECTOR_TABLES: list[str] = []


class PgVectorIndex:
    def __init__(self, db) -> None:
        self._db = db


class PgEmbeddingCache:
    def __init__(self, db) -> None:
        self._db = db
