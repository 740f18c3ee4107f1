"""The dashboard's library calls (memstack.views.users, memstack.edits) on every backend: memory,
SQLite, JSON lines (no model-made memory: listed, not editable) and PostgreSQL."""

from __future__ import annotations

import pytest

from memstack.backends.jsonl import JsonlStore
from memstack.backends.memory import MemoryStore
from memstack.backends.sqlite import SQLiteStore
from memstack.testing.dashboard import DashboardContract


class TestMemoryDashboard(DashboardContract):
    def new_store(self):
        return MemoryStore()


class TestSQLiteDashboard(DashboardContract):
    @pytest.fixture(autouse=True)
    def _tmp(self, tmp_path):
        self.path = tmp_path / "memstack.db"

    def new_store(self):
        return SQLiteStore(self.path)


class TestJsonlDashboard(DashboardContract):
    keeps_records = False

    @pytest.fixture(autouse=True)
    def _tmp(self, tmp_path):
        self.root = tmp_path / "store"

    def new_store(self):
        return JsonlStore(self.root)


@pytest.mark.postgres
class TestPostgresDashboard(DashboardContract):
    @pytest.fixture(autouse=True)
    def fresh_schema(self, request):
        from pgsupport import require_dsn

        self.dsn = require_dsn("dashboard")
        self.schema = request.getfixturevalue("schema")

    def new_store(self):
        from memstack.backends.postgres import PostgresStore

        return PostgresStore(self.dsn, schema=self.schema)
