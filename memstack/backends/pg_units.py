"""PostgreSQL unit store with BM25 keyword search over jieba-segmented text. PLACEHOLDER: being written."""

from __future__ import annotations

UNIT_MIGRATIONS: list = []
UNIT_TABLES: list[str] = []


class PostgresUnits:
    def __init__(self, db) -> None:
        self._db = db
