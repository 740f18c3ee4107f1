"""Memory and AsyncMemory pass one contract (``memstack.testing.memory``) on the memory, SQLite and
PostgreSQL backends; AsyncMemory runs through a blocking facade (``Blocking``), its calls from
several threads at once concurrent on one event loop. Every test works in a tenant of its own;
the PostgreSQL classes share one schema each (dropped afterwards), as migrating a fresh one per
test would cost a second a test."""

from __future__ import annotations

import uuid

import pytest
from pgsupport import drop_schema, require_dsn

from memstack.backends.memory import MemoryStore
from memstack.backends.sqlite import SQLiteStore
from memstack.testing import AsyncMemoryContract, MemoryContract


class TestMemoryOnMemoryStore(MemoryContract):
    def new_store(self):
        return MemoryStore()


class TestAsyncMemoryOnMemoryStore(AsyncMemoryContract, TestMemoryOnMemoryStore):
    pass


class TestMemoryOnSQLite(MemoryContract):
    @pytest.fixture(autouse=True)
    def _tmp(self, tmp_path):
        self.path = tmp_path / "memstack.db"

    def new_store(self):
        return SQLiteStore(self.path)


class TestAsyncMemoryOnSQLite(AsyncMemoryContract, TestMemoryOnSQLite):
    pass


@pytest.mark.postgres
class TestMemoryOnPostgres(MemoryContract):
    @pytest.fixture(scope="class", autouse=True)
    @classmethod
    def _schema(cls):
        cls.dsn, cls.schema = require_dsn("Memory contract"), f"memstack_test_{uuid.uuid4().hex[:12]}"
        yield
        drop_schema(cls.dsn, cls.schema)

    def new_store(self):
        from memstack.backends.postgres import PostgresStore

        return PostgresStore(self.dsn, schema=self.schema, max_size=4)


@pytest.mark.postgres
class TestAsyncMemoryOnPostgres(AsyncMemoryContract, TestMemoryOnPostgres):
    def test_the_history_is_native_async(self, mem):
        assert mem.inner.native  # add, history, threads and pending await psycopg's async pool
