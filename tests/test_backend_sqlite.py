import multiprocessing
import os
import sqlite3

import pytest

from memstack.backends.sqlite import MIGRATIONS, SQLiteStore, apply_migrations
from memstack.errors import SchemaError
from memstack.testing import A, StoreContract, msg


class TestSQLiteStore(StoreContract):
    durable = True

    @pytest.fixture(autouse=True)
    def _tmp(self, tmp_path):
        self.path = tmp_path / "memstack.db"

    def new_store(self):
        return SQLiteStore(self.path)

    def reopen(self, store):
        store.close()
        return SQLiteStore(self.path)


def test_migrations_from_an_empty_and_a_current_database(tmp_path):
    db = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    assert apply_migrations(db) == [name for name, _ in MIGRATIONS]
    assert apply_migrations(db) == []


def test_unknown_migration_is_refused(tmp_path):
    SQLiteStore(tmp_path / "x.db").close()
    db = sqlite3.connect(tmp_path / "x.db", isolation_level=None)
    db.execute("INSERT INTO _migrations VALUES ('999_future', 'now')")
    db.close()
    with pytest.raises(SchemaError, match="999_future"):
        SQLiteStore(tmp_path / "x.db")


def test_wal_mode(tmp_path):
    store = SQLiteStore(tmp_path / "x.db")
    assert store.query("PRAGMA journal_mode")[0][0] == "wal"
    store.close()


def _append_many(path: str, worker: int, n: int) -> None:
    store = SQLiteStore(path)
    for i in range(n):
        store.history.append(A, [msg("user", f"w{worker}-{i}")], enqueue=["probe"])
    store.close()


def test_four_processes_append_to_one_thread(tmp_path):
    path = str(tmp_path / "shared.db")
    SQLiteStore(path).close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_many, args=(path, w, 50)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    store = SQLiteStore(path)
    texts = [m.text for m in store.history.read(A)]
    assert len(texts) == 200
    for w in range(4):
        assert [t for t in texts if t.startswith(f"w{w}-")] == [f"w{w}-{i}" for i in range(50)]
    assert store.jobs.claim(worker="x").version == 200
    store.close()


def test_sqlite_memory_url_is_the_in_memory_database(tmp_path, monkeypatch):
    """sqlite:///:memory: is SQLite's in-memory database (it opened a file "/:memory:")."""
    from memstack import Memory

    monkeypatch.chdir(tmp_path)
    before = os.path.exists("/:memory:")
    with Memory("sqlite:///:memory:", layers="window") as memory:
        memory.add([{"role": "user", "content": "只在内存里"}], user_id="u", thread_id="t")
        assert [m.text for m in memory.history(user_id="u", thread_id="t")] == ["只在内存里"]
    with Memory("sqlite:///:memory:", layers="window") as memory:
        assert memory.history(user_id="u", thread_id="t") == []
    assert not list(tmp_path.iterdir())
    assert os.path.exists("/:memory:") == before
