"""The SQLite unit store passes the unit contract, survives reopening and keeps its index in step."""

import sqlite3

import pytest

from memstack.backends.sqlite import MIGRATIONS, SQLiteStore, apply_migrations
from memstack.testing import A, B, UnitStoreContract, unit


class TestSQLiteUnits(UnitStoreContract):
    @pytest.fixture(autouse=True)
    def _tmp(self, tmp_path):
        self.path = tmp_path / "memstack.db"

    def new_store(self):
        return SQLiteStore(self.path)


def index_rows(store: SQLiteStore) -> tuple[int, int]:
    return store.query("SELECT count(*) FROM unit_terms")[0][0], store.query("SELECT count(*) FROM unit_owners")[0][0]


def test_units_and_their_index_survive_reopening(tmp_path):
    store = SQLiteStore(tmp_path / "x.db")
    store.units.put([unit("a", "我平时喜欢跑步"), unit("b", "我喜欢吃火锅")])
    before = store.units.keyword_search(A, "喜欢跑步", k=5)
    store.close()
    store = SQLiteStore(tmp_path / "x.db")
    assert store.units.keyword_search(A, "喜欢跑步", k=5) == before
    store.close()


def test_deleting_units_leaves_no_postings_or_owner_rows(tmp_path):
    store = SQLiteStore(tmp_path / "x.db")
    store.units.put([unit("a", "我平时喜欢跑步"), unit("b", "跑步 跑步", B)])
    store.units.put([unit("a", "改成游泳了")])
    assert index_rows(store) == (2 + 1, 2)
    store.delete_user(A)
    assert index_rows(store) == (1, 1)
    store.history.delete_thread(B)
    assert index_rows(store) == (0, 0)
    store.close()


def test_a_database_from_before_units_gains_them(tmp_path):
    db = sqlite3.connect(tmp_path / "old.db", isolation_level=None)
    apply_migrations(db, MIGRATIONS[:1])
    db.close()
    store = SQLiteStore(tmp_path / "old.db")
    store.units.put([unit("a", "我平时喜欢跑步")])
    assert [s.id for s in store.units.keyword_search(A, "跑步", k=5)] == ["a"]
    store.close()
