"""In-memory vector index (numpy) and embedding cache. PLACEHOLDER: being written."""

from __future__ import annotations


class NumpyVectorIndex:
    def delete(self, scope, ids=None) -> int:
        return 0


class MemoryEmbeddingCache:
    def delete(self, scope) -> int:
        return 0
