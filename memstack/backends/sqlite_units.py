"""SQLite unit store with BM25 keyword search over jieba-segmented text (FTS5). PLACEHOLDER: being written."""

from __future__ import annotations

UNIT_MIGRATIONS: list = []
UNIT_TABLES: list[str] = []


class SQLiteUnits:
    def __init__(self, store) -> None:
        self._s = store
