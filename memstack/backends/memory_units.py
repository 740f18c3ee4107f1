"""In-memory unit store with BM25 keyword search. PLACEHOLDER: being written."""

from __future__ import annotations


class MemoryUnits:
    def delete(self, scope, ids=None) -> int:
        return 0
